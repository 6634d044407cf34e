#include "workerstore/tcpstore_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace distjob {
namespace {

sockaddr_storage V6(const char* ip, uint16_t port) {
  sockaddr_storage ss{};
  auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a->sin6_addr);
  return ss;
}

TEST(TcpStoreSocketTest, AddressesHaveOneForm) {
  EXPECT_EQ(NormalizeText("10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(NormalizeText("::ffff:10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(NormalizeText("0:0::1"), "::1");
  EXPECT_EQ(NormalizeText("node-1"), "");
  const sockaddr_storage mapped = V6("::ffff:10.0.0.7", 41234);
  EXPECT_EQ(NormalizeAddress(mapped), "10.0.0.7");
  EXPECT_EQ(PeerName(mapped, NormalizeAddress(mapped)), "10.0.0.7:41234");
  const sockaddr_storage v6 = V6("fd00::2", 80);
  EXPECT_EQ(PeerName(v6, NormalizeAddress(v6)), "[fd00::2]:80");
}

}  // namespace
}  // namespace distjob
