#include "common/backoff.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(BackoffTest, DoublesUpToTheCapWithJitterBelowTheStep) {
  Backoff b(absl::Milliseconds(100), absl::Seconds(1), 0.5);
  const absl::Duration steps[] = {
      absl::Milliseconds(100), absl::Milliseconds(200), absl::Milliseconds(400),
      absl::Milliseconds(800), absl::Seconds(1),        absl::Seconds(1)};
  for (absl::Duration step : steps) {
    const absl::Duration pause = b.Next();
    EXPECT_LE(pause, step);
    EXPECT_GE(pause, step / 2);
  }
  EXPECT_EQ(b.attempts(), 6);
  b.Reset();
  EXPECT_EQ(b.attempts(), 0);
  EXPECT_LE(b.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterSpreadsNodesThatFailTogether) {
  Backoff a(absl::Seconds(1), absl::Seconds(1));
  Backoff b(absl::Seconds(1), absl::Seconds(1));
  bool differ = false;
  for (int i = 0; i < 8 && !differ; ++i) differ = a.Next() != b.Next();
  EXPECT_TRUE(differ);
}

}  // namespace
}  // namespace distjob
