#include "common/progress_log.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::function<absl::Time()> Fn() {
    return [this] { return now; };
  }
};

TEST(ProgressLogTest, FirstLineOneIntervalAfterTheStart) {
  FakeClock clock;
  ProgressLog log(absl::Seconds(15), clock.Fn());
  EXPECT_FALSE(log.Due());
  clock.now += absl::Seconds(14);
  EXPECT_FALSE(log.Due());
  clock.now += absl::Seconds(1);
  EXPECT_TRUE(log.Due());
  EXPECT_EQ(log.Elapsed(), absl::Seconds(15));
}

TEST(ProgressLogTest, AtMostOneLinePerIntervalHoweverOftenAsked) {
  FakeClock clock;
  ProgressLog log(absl::Seconds(10), clock.Fn());
  int lines = 0;
  // A wait that wakes every 50 ms for a minute.
  for (int i = 0; i < 1200; ++i) {
    clock.now += absl::Milliseconds(50);
    if (log.Due()) ++lines;
  }
  EXPECT_EQ(lines, 6);
}

TEST(ProgressLogTest, ALongBlockedIterationLogsOnceThenCountsAgain) {
  FakeClock clock;
  ProgressLog log(absl::Seconds(10), clock.Fn());
  clock.now += absl::Seconds(45);  // one call blocked 4.5 intervals
  EXPECT_TRUE(log.Due());
  EXPECT_FALSE(log.Due());
  clock.now += absl::Seconds(9);
  EXPECT_FALSE(log.Due());
  clock.now += absl::Seconds(1);
  EXPECT_TRUE(log.Due());
  EXPECT_EQ(log.Elapsed(), absl::Seconds(55));
}

TEST(ProgressLogTest, DefaultIntervalIsWithinTenToThirtySeconds) {
  // The test hook is not set under bazel test.
  EXPECT_GE(ProgressInterval(), absl::Seconds(10));
  EXPECT_LE(ProgressInterval(), absl::Seconds(30));
}

}  // namespace
}  // namespace distjob
