#include "common/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(SocketAddressTest, ParsesBothFamiliesWithThePort) {
  auto v4 = ParseSocketAddress("127.0.0.2", 29400);
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->family(), AF_INET);
  EXPECT_EQ(v4->length, sizeof(sockaddr_in));
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(v4->get());
  EXPECT_EQ(ntohs(in4->sin_port), 29400);
  EXPECT_EQ(ntohl(in4->sin_addr.s_addr), 0x7f000002u);

  for (const char* text : {"::1", "[::1]"}) {
    auto v6 = ParseSocketAddress(text, 0);
    ASSERT_TRUE(v6.has_value()) << text;
    EXPECT_EQ(v6->family(), AF_INET6) << text;
    EXPECT_EQ(v6->length, sizeof(sockaddr_in6)) << text;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(v6->get());
    EXPECT_TRUE(IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) << text;
  }
}

TEST(SocketAddressTest, RefusesNamesAndBadPorts) {
  for (const char* text : {"localhost", "", "[127.0.0.1", "::1]", "1.2.3",
                           "host.example", "[localhost]"}) {
    EXPECT_FALSE(ParseSocketAddress(text, 80).has_value()) << text;
  }
  EXPECT_FALSE(ParseSocketAddress(std::string("127.0.0.1\0x", 11), 80));
  EXPECT_FALSE(ParseSocketAddress("127.0.0.1", -1).has_value());
  EXPECT_FALSE(ParseSocketAddress("127.0.0.1", 65536).has_value());
  EXPECT_TRUE(ParseSocketAddress("127.0.0.1", 65535).has_value());
}

}  // namespace
}  // namespace distjob
