#include "discovery/dns_resolver.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(DnsResolverTest, LiteralsResolveWithoutAServer) {
  DnsOptions o;
  o.timeout = absl::Seconds(2);
  auto r = WaitForNames({"127.0.0.1", "::1"}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at("127.0.0.1")[0], "127.0.0.1");
  EXPECT_EQ(r->at("::1")[0], "::1");
}

TEST(DnsResolverTest, TimeoutNamesTheMissingPeer) {
  DnsOptions o;
  // A loopback port nobody serves: every query fails fast.
  o.resolver.servers = {"127.0.0.1:9"};
  o.timeout = absl::Milliseconds(300);
  o.resolver.query_timeout = absl::Milliseconds(100);
  auto r = WaitForNames({"no-such-peer.invalid"}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("no-such-peer.invalid"),
            std::string::npos);
}

TEST(DnsResolverTest, CancelStopsTheWait) {
  DnsOptions o;
  o.resolver.servers = {"127.0.0.1:9"};
  o.timeout = absl::Seconds(60);
  o.resolver.query_timeout = absl::Milliseconds(50);
  o.resolver.cancelled = [] { return true; };
  const absl::Time start = absl::Now();
  auto r = WaitForNames({"no-such-peer.invalid"}, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace distjob
