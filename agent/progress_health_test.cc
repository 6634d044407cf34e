#include "agent/progress_health.h"

#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

TEST(ProgressHealthTest, NoGroupRunningIsHealthy) {
  ProgressSnapshot idle;
  HttpAnswer a = ProgressAnswer(idle, kNow, absl::Seconds(60));
  EXPECT_EQ(a.code, 200);
  EXPECT_NE(a.body.find("no workers running"), std::string::npos) << a.body;
}

TEST(ProgressHealthTest, RecentProgressIsHealthy) {
  ProgressSnapshot p{true, kNow - absl::Seconds(59)};
  HttpAnswer a = ProgressAnswer(p, kNow, absl::Seconds(60));
  EXPECT_EQ(a.code, 200);
  EXPECT_NE(a.body.find("59s"), std::string::npos) << a.body;
}

TEST(ProgressHealthTest, StaleProgressIs503WithItsAge) {
  ProgressSnapshot p{true, kNow - absl::Seconds(61)};
  HttpAnswer a = ProgressAnswer(p, kNow, absl::Seconds(60));
  EXPECT_EQ(a.code, 503);
  EXPECT_NE(a.body.find("last progress 1m1s ago, more than 1m"),
            std::string::npos)
      << a.body;
}

TEST(ProgressHealthTest, AClockStepBackIsNotANegativeAge) {
  ProgressSnapshot p{true, kNow + absl::Seconds(5)};
  HttpAnswer a = ProgressAnswer(p, kNow, absl::Seconds(1));
  EXPECT_EQ(a.code, 200);
  EXPECT_NE(a.body.find(" 0 ago"), std::string::npos) << a.body;
}

}  // namespace
}  // namespace distjob
