#include "rendezvous/rdzv_state.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RdzvStateTest, EncodeDecodeRoundTrip) {
  RdzvState s;
  s.round = 7;
  s.closed = true;
  s.restart_count = 2;
  s.previous = {"a", "b"};
  s.participants = {{"a", 2, "10.0.0.1"}, {"c", 1, "::1"}};
  auto d = RdzvState::Decode(s.Encode());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->Encode(), s.Encode());
  EXPECT_EQ(d->Find("c"), 1);
  EXPECT_EQ(d->Find("zz"), -1);
  EXPECT_FALSE(RdzvState::Decode("round x\n").ok());
}

TEST(RdzvStateTest, HostFirstThenPreviousOrderThenNewcomers) {
  RdzvState s;
  s.previous = {"b", "a"};
  s.participants = {{"new", 1, ""}, {"a", 1, ""}, {"h", 1, ""}, {"b", 1, ""}};
  s.AssignRanks("h");
  std::vector<std::string> order;
  for (const auto& p : s.participants) order.push_back(p.node);
  EXPECT_EQ(order, (std::vector<std::string>{"h", "b", "a", "new"}));
}

}  // namespace
}  // namespace distjob
