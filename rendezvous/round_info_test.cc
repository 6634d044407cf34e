#include "rendezvous/round_info.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RoundInfoTest, RoundTripsWithAndWithoutTheLastCall) {
  RoundInfo info{2, 4, absl::Seconds(30), std::nullopt};
  auto back = DecodeRoundInfo(EncodeRoundInfo(info));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->min_nodes, 2);
  EXPECT_EQ(back->max_nodes, 4);
  EXPECT_EQ(back->last_call_timeout, absl::Seconds(30));
  EXPECT_FALSE(back->last_call_ends.has_value());
  info.last_call_ends = absl::FromUnixMillis(1800000000123);
  back = DecodeRoundInfo(EncodeRoundInfo(info));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->last_call_ends, info.last_call_ends);
}

TEST(RoundInfoTest, RefusesWhatNoAgentWrites) {
  for (const char* text :
       {"", "[]", "{}", "not json",
        R"({"min_nodes":3,"max_nodes":2,)"
        R"("last_call_timeout_ms":0})",
        R"({"min_nodes":"1","max_nodes":2,"last_call_timeout_ms":0})",
        R"({"min_nodes":1,"max_nodes":2,"last_call_timeout_ms":-1})"}) {
    EXPECT_FALSE(DecodeRoundInfo(text).ok()) << text;
  }
}

}  // namespace
}  // namespace distjob
