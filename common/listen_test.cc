#include "common/listen.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(ListenTcpTest, ListensOnAFreePortAndNamesATakenOne) {
  auto fd = ListenTcp("127.0.0.1", 0, 16);
  ASSERT_TRUE(fd.ok()) << fd.status();
  const int port = BoundPort(*fd);
  EXPECT_GT(port, 0);
  auto again = ListenTcp("127.0.0.1", port, 16);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(again.status().message().find(
                absl::StrCat("cannot listen on 127.0.0.1:", port, ": ")),
            absl::string_view::npos)
      << again.status();
  close(*fd);
}

TEST(ListenTcpTest, OnEveryAddressTheErrorNamesThePort) {
  auto fd = ListenTcp("0.0.0.0", 0, 16);
  ASSERT_TRUE(fd.ok()) << fd.status();
  const int port = BoundPort(*fd);
  auto again = ListenTcp("0.0.0.0", port, 16);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(
                absl::StrCat("cannot listen on port ", port, ": ")),
            absl::string_view::npos)
      << again.status();
  close(*fd);
}

TEST(ListenTcpTest, TheSocketIsNonBlockingAndClosedOnExec) {
  auto fd = ListenTcp("127.0.0.1", 0, 16);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_TRUE(fcntl(*fd, F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(fcntl(*fd, F_GETFD) & FD_CLOEXEC);
  close(*fd);
}

TEST(ListenTcpTest, TheUnspecifiedV6AddressAlsoTakesIpv4) {
  auto fd = ListenTcp("[::]", 0, 16);
  ASSERT_TRUE(fd.ok()) << fd.status();
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ASSERT_EQ(getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &len), 0);
  if (bound.ss_family == AF_INET6) {
    int v6only = 1;
    socklen_t size = sizeof(v6only);
    ASSERT_EQ(getsockopt(*fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &size), 0);
    EXPECT_EQ(v6only, 0);
  }
  // Either way an IPv4 client reaches it.
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<uint16_t>(BoundPort(*fd)));
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  close(client);
  close(*fd);
}

TEST(ListenTcpTest, BadAddressesAreRefusedAsInvalid) {
  EXPECT_EQ(ListenTcp("node-1", 0, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListenTcp("127.0.0.1", 70000, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListenTcp("127.0.0.1", -1, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distjob
