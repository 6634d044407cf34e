// ParseEtcdOptions: --rdzv-endpoint and the etcd keys of --rdzv-conf.
#include "rendezvous/store/etcd/options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(EtcdOptionsTest, EmptyOrGarbageEndpointsAreRefused) {
  for (const char* bad :
       {"", " , ", "unix:///run/etcd.sock", "h:x", "a:b:c", "h 1:2379", "-h",
        "h:0", "h:99999", "[h]:1", "http://"}) {
    auto o = ParseEtcdOptions(bad, "", "r");
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.status().message().find("--rdzv-endpoint"), std::string::npos);
  }
  for (const char* bad :
       {"read_timeout=nan", "read_timeout=inf", "etcd_session_ttl=1e400"}) {
    EXPECT_FALSE(ParseEtcdOptions("h", bad, "r").ok()) << bad;
  }
  EXPECT_EQ(ParseEtcdOptions("https://[fd00::1]/", "", "r")->endpoints,
            (std::vector<std::string>{"[fd00::1]:2379"}));
}

TEST(EtcdOptionsTest, ParsesEndpointsAndConf) {
  auto o = ParseEtcdOptions(
      "http://h1:2379, h2,[::1]:3000",
      "etcd_prefix=/p/,read_timeout=7,ca_cert=/ca.pem,join_timeout=9", "r");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->endpoints,
            (std::vector<std::string>{"h1:2379", "h2:2379", "[::1]:3000"}));
  EXPECT_EQ(o->prefix, "/p");
  EXPECT_EQ(o->rpc_timeout, absl::Seconds(7));
  EXPECT_EQ(o->ca_cert, "/ca.pem");
  EXPECT_EQ(ParseEtcdOptions("h", "etcd_prefix=rel", "r").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseEtcdOptions("h", "cert=/c.pem", "r").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseEtcdOptions("h", "read_timeout=x", "r").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distjob
