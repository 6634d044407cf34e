#include "common/log_rate_limiter.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(LogRateLimiterTest, OneLineAnIntervalPerKindWithTheHeldBackCount) {
  LogRateLimiter limiter(absl::Seconds(1));
  int64_t held = -1;
  ASSERT_TRUE(limiter.Allow("violation", kT0, &held));
  EXPECT_EQ(held, 0);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(
        limiter.Allow("violation", kT0 + absl::Milliseconds(i * 100), &held));
  }
  // Another kind has its own line.
  EXPECT_TRUE(limiter.Allow("refused", kT0, &held));
  EXPECT_EQ(held, 0);
  EXPECT_FALSE(
      limiter.Allow("violation", kT0 + absl::Milliseconds(999), &held));
  ASSERT_TRUE(limiter.Allow("violation", kT0 + absl::Seconds(1), &held));
  EXPECT_EQ(held, 6);
  ASSERT_TRUE(limiter.Allow("violation", kT0 + absl::Seconds(5), &held));
  EXPECT_EQ(held, 0);
}

TEST(LogRateLimiterTest, OverdueTellsTheTailOfAFloodOnce) {
  LogRateLimiter limiter(absl::Seconds(1));
  int64_t held = 0;
  ASSERT_TRUE(limiter.Allow("b", kT0, &held));
  ASSERT_TRUE(limiter.Allow("a", kT0, &held));
  ASSERT_TRUE(limiter.Allow("c", kT0, &held));
  EXPECT_FALSE(limiter.Allow("b", kT0, &held));
  EXPECT_FALSE(limiter.Allow("a", kT0, &held));
  EXPECT_FALSE(limiter.Allow("a", kT0, &held));
  // Not yet an interval old.
  EXPECT_TRUE(limiter.Overdue(kT0 + absl::Milliseconds(500)).empty());
  const auto overdue = limiter.Overdue(kT0 + absl::Seconds(1));
  ASSERT_EQ(overdue.size(), 2u);
  EXPECT_EQ(overdue[0], std::make_pair(std::string("a"), int64_t{2}));
  EXPECT_EQ(overdue[1], std::make_pair(std::string("b"), int64_t{1}));
  EXPECT_TRUE(limiter.Overdue(kT0 + absl::Seconds(9)).empty());
  // The summary was a line: the next event waits an interval from it.
  EXPECT_FALSE(limiter.Allow("a", kT0 + absl::Milliseconds(1500), &held));
}

TEST(LogRateLimiterTest, ShapeMakesOneKindOfMessagesWhoseNumbersVary) {
  EXPECT_EQ(LogRateLimiter::Shape("unknown query type 254"),
            "unknown query type #");
  EXPECT_EQ(LogRateLimiter::Shape("set: value of 2097152 bytes over 1048576"),
            "set: value of # bytes over #");
  EXPECT_EQ(LogRateLimiter::Shape("7x"), "#x");
  EXPECT_EQ(LogRateLimiter::Shape(""), "");
}

TEST(LogRateLimiterTest, HeldBackSuffix) {
  EXPECT_EQ(LogRateLimiter::HeldBackSuffix(0), "");
  EXPECT_EQ(LogRateLimiter::HeldBackSuffix(3),
            " (and 3 more like it not logged)");
}

}  // namespace
}  // namespace distjob
