#include "supervisor/line_policy.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(LinePolicyTest, LocalRanksFilter) {
  EXPECT_EQ(*ParseLocalRanksFilter("0, 3"), (std::set<int>{0, 3}));
  EXPECT_TRUE(ParseLocalRanksFilter("")->empty());
  EXPECT_FALSE(ParseLocalRanksFilter("abc").ok());
  EXPECT_FALSE(ParseLocalRanksFilter("0,,1").ok());
  EXPECT_FALSE(ParseLocalRanksFilter("-1").ok());
  EXPECT_TRUE(RankShown({}, 5));
  EXPECT_TRUE(RankShown({0, 2}, 2));
  EXPECT_FALSE(RankShown({0, 2}, 1));
}

TEST(LinePolicyTest, DuplicateFiltersEscapeCommas) {
  EXPECT_EQ(ParseDuplicateFilters("loss,acc,,uracy,,"),
            (std::vector<std::string>{"loss", "acc,uracy,"}));
  EXPECT_EQ(ParseDuplicateFilters(",a,"), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(ParseDuplicateFilters("").empty());
}

TEST(LinePolicyTest, DuplicateNeedsAFileAndAMatch) {
  LinePolicy policy;
  policy.duplicate_filters = {"loss"};
  EXPECT_FALSE(ShouldDuplicate(policy, "loss=1\n"));
  policy.duplicate_fd = 9;
  EXPECT_TRUE(ShouldDuplicate(policy, "step 3 loss=1\n"));
  EXPECT_FALSE(ShouldDuplicate(policy, "step 3\n"));
}

TEST(LinePolicyTest, PrefixTemplate) {
  PrefixFields f{"trainer", 1, 5, "pod-a"};
  EXPECT_EQ(RenderLinePrefix("", f), "[trainer1]:");
  EXPECT_EQ(
      RenderLinePrefix("[${role_name}/${rank}/${local_rank}@${hostname}] ", f),
      "[trainer/5/1@pod-a] ");
  EXPECT_EQ(RenderLinePrefix("$rank:$local_rank|", f), "5:1|");
  // safe_substitute: unknown names and a lone '$' stay as written.
  EXPECT_EQ(RenderLinePrefix("${nope} $x $$ ${rank", f), "${nope} $x $ ${rank");
  EXPECT_EQ(RenderLinePrefix("cost $", f), "cost $");
}

TEST(LinePolicyTest, FilteredRanksKeepFilesAndLeaveTheConsole) {
  StreamPlan shown = PlanStreams(/*redirect=*/1, /*tee=*/2, true);
  EXPECT_EQ(shown.redirect, 1);
  EXPECT_EQ(shown.tee, 2);
  EXPECT_EQ(shown.discard, 0);
  StreamPlan hidden = PlanStreams(/*redirect=*/0, /*tee=*/1, false);
  EXPECT_EQ(hidden.redirect, 1);
  EXPECT_EQ(hidden.tee, 0);
  EXPECT_EQ(hidden.discard, 2);
  EXPECT_EQ(PlanStreams(0, 0, false).discard, 3);
}

}  // namespace
}  // namespace distjob
