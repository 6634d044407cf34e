#include "common/resolver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(ResolverTest, LiteralsResolveWithoutAQuery) {
  // A DNS server that reads and never answers: a literal must send it
  // nothing (not even a query for the other address family).
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ResolverOptions o;
  o.servers = {absl::StrCat("127.0.0.1:", ntohs(addr.sin_port))};
  o.query_timeout = absl::Milliseconds(200);
  auto r = ResolveNames({"127.0.0.1", "::1", "[::1]"}, o);
  char packet[512];
  const ssize_t got = recv(fd, packet, sizeof(packet), MSG_DONTWAIT);
  close(fd);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at("127.0.0.1"), std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(r->at("::1"), std::vector<std::string>{"::1"});
  EXPECT_EQ(r->at("[::1]"), std::vector<std::string>{"::1"});
  EXPECT_EQ(got, -1) << "a DNS query was sent for a literal";
}

TEST(ResolverTest, UnknownNameIsNotFoundNamingIt) {
  ResolverOptions o;
  o.servers = {"127.0.0.1:9"};
  o.query_timeout = absl::Milliseconds(100);
  auto r = ResolveHost("no-such-peer.invalid", o);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("no-such-peer.invalid"),
            std::string::npos);
}

TEST(ResolverTest, BadServerIsInvalidArgument) {
  ResolverOptions o;
  o.servers = {"not an address"};
  EXPECT_EQ(ResolveNames({"x"}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResolverTest, GrpcTargetForIpv4KeepsTheName) {
  auto t = GrpcTargetFor("store-0.job", 29400, {"10.0.0.1", "10.0.0.2"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->target, "ipv4:10.0.0.1:29400,10.0.0.2:29400");
  EXPECT_EQ(t->authority, "store-0.job:29400");
  EXPECT_EQ(t->host, "store-0.job");
}

TEST(ResolverTest, GrpcTargetForIpv6Brackets) {
  auto t = GrpcTargetFor("store-0", 80, {"fd00::1", "10.0.0.1", "::1"});
  ASSERT_TRUE(t.ok()) << t.status();
  // One family per target: the first address' family.
  EXPECT_EQ(t->target, "ipv6:[fd00::1]:80,[::1]:80");
  EXPECT_EQ(t->authority, "store-0:80");
}

TEST(ResolverTest, GrpcTargetForRejectsNonAddresses) {
  EXPECT_EQ(GrpcTargetFor("h", 1, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GrpcTargetFor("h", 1, {"h"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResolverTest, LiteralEndpointsPassThroughWithoutLookup) {
  // A nanosecond is no time for a lookup: literals take none.
  auto v4 = ResolveGrpcEndpoint("127.0.0.1:5", absl::Nanoseconds(1));
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->target, "ipv4:127.0.0.1:5");
  EXPECT_EQ(v4->authority, "127.0.0.1:5");
  auto v6 = ResolveGrpcEndpoint("[::1]:5", absl::Nanoseconds(1));
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->target, "ipv6:[::1]:5");
  EXPECT_EQ(v6->authority, "[::1]:5");
  EXPECT_EQ(v6->host, "::1");
}

TEST(ResolverTest, MalformedEndpointIsInvalidArgument) {
  for (const char* bad : {"nohost", ":80", "h:0", "h:70000", "::1:80", "h:x"}) {
    EXPECT_EQ(ResolveGrpcEndpoint(bad, absl::Seconds(1)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ResolverTest, JoinHostPortBracketsIpv6) {
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("[::1]", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("h", 80), "h:80");
}

}  // namespace
}  // namespace distjob
