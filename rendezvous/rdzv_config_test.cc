#include "rendezvous/rdzv_config.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RdzvConfigTest, EndpointForms) {
  EXPECT_EQ(ParseEndpoint("h")->port, 29400);
  EXPECT_EQ(ParseEndpoint("h:23456")->port, 23456);
  EXPECT_EQ(ParseEndpoint("[::1]:5")->host, "::1");
  EXPECT_EQ(ParseEndpoint("[::1]:5")->ToString(), "[::1]:5");
  EXPECT_EQ(ParseEndpoint("")->host, "localhost");
  EXPECT_FALSE(ParseEndpoint("h:x").ok());
  EXPECT_FALSE(ParseEndpoint("[::1").ok());
}

TEST(RdzvConfigTest, TorchrunKeysAndDefaults) {
  auto c = ParseRdzvConf("");
  EXPECT_EQ(c->join_timeout, absl::Seconds(600));
  EXPECT_EQ(c->last_call_timeout, absl::Seconds(30));
  EXPECT_EQ(c->read_timeout, absl::Seconds(60));
  EXPECT_EQ(c->keep_alive_max_attempt, 3);
  EXPECT_FALSE(c->is_host.has_value());
  c = ParseRdzvConf(
      "join_timeout=5,last_call_timeout=0.5,keep_alive_interval=1,"
      "keep_alive_max_attempt=2,is_host=true,store_type=tcp");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->join_timeout, absl::Seconds(5));
  EXPECT_EQ(c->last_call_timeout, absl::Milliseconds(500));
  EXPECT_EQ(c->keep_alive_max_attempt, 2);
  EXPECT_TRUE(*c->is_host);
  EXPECT_FALSE(ParseRdzvConf("join_timeout=soon").ok());
  EXPECT_FALSE(ParseRdzvConf("is_host=maybe").ok());
  EXPECT_FALSE(ParseRdzvConf("join_timeout").ok());
}

TEST(RdzvConfigTest, UnknownKeyNamesTheClosestAcceptedOne) {
  auto c = ParseRdzvConf("join_timout=5");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  EXPECT_NE(c.status().message().find("'join_timout'"), std::string::npos);
  EXPECT_NE(c.status().message().find("did you mean 'join_timeout'?"),
            std::string::npos);
  c = ParseRdzvConf("Last_Call_Timeout=5");
  EXPECT_NE(c.status().message().find("did you mean 'last_call_timeout'?"),
            std::string::npos);
  // Nothing near: no suggestion, the accepted keys instead.
  c = ParseRdzvConf("banana=1");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().find("did you mean"), std::string::npos);
  EXPECT_NE(c.status().message().find("accepted: join_timeout"),
            std::string::npos);
}

TEST(RdzvConfigTest, TorchrunOnlyKeysAreNoticesNotErrors) {
  std::vector<std::string> notices;
  auto c = ParseRdzvConf("store_type=tcp,timeout=900,join_timeout=7", &notices);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->join_timeout, absl::Seconds(7));
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_NE(notices[0].find("store_type=tcp"), std::string::npos);
  EXPECT_NE(notices[1].find("timeout=900"), std::string::npos);
  // The etcd backend's keys travel through untouched.
  notices.clear();
  EXPECT_TRUE(ParseRdzvConf("etcd_prefix=/x,ca_cert=/c", &notices).ok());
  EXPECT_TRUE(notices.empty());
}

TEST(RdzvConfigTest, BackendNames) {
  EXPECT_EQ(*ParseRdzvBackend("static"), RdzvBackend::kStatic);
  EXPECT_EQ(*ParseRdzvBackend("c10d"), RdzvBackend::kC10d);
  EXPECT_EQ(*ParseRdzvBackend("etcd"), RdzvBackend::kEtcd);
  EXPECT_EQ(*ParseRdzvBackend("etcd-v3"), RdzvBackend::kEtcdV3);
  EXPECT_STREQ(RdzvBackendName(RdzvBackend::kEtcdV3), "etcd-v3");
  auto bad = ParseRdzvBackend("zookeeper");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'zookeeper'"), std::string::npos);
}

TEST(RdzvConfigTest, EndpointsThatAreNotHostPortAreRefused) {
  for (const std::string& bad : std::vector<std::string>{
           "http://h:29400", "a:b:c", "h :1", " h", "-h:1", "h:", "[h]:1",
           "h:+5", "h\n:1", std::string("h\0x", 3), "[::1]:"}) {
    auto ep = ParseEndpoint(bad);
    ASSERT_FALSE(ep.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(ep.status()));
    EXPECT_NE(ep.status().message().find("--rdzv-endpoint"), std::string::npos);
    EXPECT_EQ(ep.status().message().find('\n'), std::string::npos);
  }
  EXPECT_EQ(ParseEndpoint(":5")->host, "localhost");
}

TEST(RdzvConfigTest, DurationsAreFiniteBoundedAndKeepAlivePositive) {
  for (const char* bad : {"join_timeout=nan", "join_timeout=inf",
                          "read_timeout=1e400", "close_timeout=1e12",
                          "keep_alive_interval=0", "keep_alive_interval=0.0"}) {
    auto c = ParseRdzvConf(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
  }
  EXPECT_TRUE(ParseRdzvConf("keep_alive_interval=0.5").ok());
}

TEST(RdzvConfigTest, WorkerStoreResolveTimeoutIsPositiveWithADefault) {
  EXPECT_EQ(ParseRdzvConf("")->worker_store_resolve_timeout, absl::Seconds(10));
  auto c = ParseRdzvConf("worker_store_resolve_timeout=2.5");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->worker_store_resolve_timeout, absl::Milliseconds(2500));
  for (const char* bad :
       {"worker_store_resolve_timeout=0", "worker_store_resolve_timeout=-1",
        "worker_store_resolve_timeout=1e12"}) {
    auto r = ParseRdzvConf(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
    EXPECT_NE(r.status().message().find("worker_store_resolve_timeout"),
              std::string::npos)
        << r.status();
  }
}

// Group rank 0 resolves before it writes the master record the others wait
// for up to close_timeout: the pass must end first.
TEST(RdzvConfigTest, WorkerStoreResolveTimeoutFitsInCloseTimeout) {
  EXPECT_EQ(ParseRdzvConf("close_timeout=6")->worker_store_resolve_timeout,
            absl::Seconds(3));
  EXPECT_EQ(ParseRdzvConf("close_timeout=60")->worker_store_resolve_timeout,
            absl::Seconds(10));
  EXPECT_EQ(ParseRdzvConf("close_timeout=60,worker_store_resolve_timeout=40")
                ->worker_store_resolve_timeout,
            absl::Seconds(40));
  auto r = ParseRdzvConf("worker_store_resolve_timeout=30");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("close_timeout (30s)"), std::string::npos)
      << r.status();
}

TEST(RdzvConfigTest, EndpointErrorsNameTheValue) {
  auto ep = ParseEndpoint("host:99999");
  ASSERT_FALSE(ep.ok());
  EXPECT_NE(ep.status().message().find("host:99999"), std::string::npos);
  EXPECT_FALSE(ParseEndpoint("[::1]x").ok());
  EXPECT_EQ(ParseEndpoint("[fe80::1]")->port, 29400);
  EXPECT_EQ(ParseEndpoint("fe80::1")->host, "fe80::1");
}

TEST(RdzvConfigTest, StoreLimitsAreBoundedAndNamed) {
  auto c = ParseRdzvConf(
      "store_max_memory_mb=512,store_max_value_kb=64,store_max_parked=1000,"
      "store_max_conns=128,store_max_conns_per_peer=8");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store_max_memory_mb, 512);
  EXPECT_EQ(c->store_max_value_kb, 64);
  EXPECT_EQ(c->store_max_parked, 1000);
  EXPECT_EQ(c->store_max_conns, 128);
  EXPECT_EQ(c->store_max_conns_per_peer, 8);
  const RdzvConfig defaults;
  EXPECT_EQ(defaults.store_max_conns, 4096);
  EXPECT_EQ(defaults.store_max_conns_per_peer, 64);
  for (const char* bad :
       {"store_max_memory_mb=1", "store_max_value_kb=0",
        "store_max_value_kb=8192", "store_max_parked=x",
        "store_max_conns=70000", "store_max_conns_per_peer=-1"}) {
    auto r = ParseRdzvConf(bad);
    ASSERT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
    const std::string key(
        absl::string_view(bad).substr(0, absl::string_view(bad).find('=')));
    EXPECT_NE(r.status().message().find(key), absl::string_view::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("expected an integer from"),
              absl::string_view::npos)
        << r.status();
  }
}

TEST(RdzvConfigTest, LocalHostNames) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_FALSE(IsLocalHost("192.0.2.77"));
  EXPECT_FALSE(IsLocalHost("no-such-host.example"));
}

}  // namespace
}  // namespace distjob
