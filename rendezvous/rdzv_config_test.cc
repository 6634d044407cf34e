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

TEST(RdzvConfigTest, LocalHostNames) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_FALSE(IsLocalHost("192.0.2.77"));
  EXPECT_FALSE(IsLocalHost("no-such-host.example"));
}

}  // namespace
}  // namespace distjob
