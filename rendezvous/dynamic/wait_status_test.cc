#include "rendezvous/dynamic/wait_status.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(WaitStatusTest, ANewWaitReplacesTheLastOnesRoundNodeAndSize) {
  WaitStatus status;
  EXPECT_EQ(status.Get().wait, RdzvWait::kNone);
  status.Set(RdzvWait::kExitBarrier, 4, "", 16);
  status.Set(RdzvWait::kDecider, 5, "n3");
  const WaitStatus::Snapshot now = status.Get();
  EXPECT_EQ(now.wait, RdzvWait::kDecider);
  EXPECT_EQ(now.round, 5);
  EXPECT_EQ(now.node, "n3");
  EXPECT_EQ(now.size, 0);
}

TEST(WaitStatusTest, TheDeadlineOutlivesTheWaitsItBounds) {
  WaitStatus status;
  EXPECT_EQ(status.Get().until, absl::InfiniteFuture());
  const absl::Time until = absl::FromUnixSeconds(1000);
  status.SetUntil(until);
  status.Set(RdzvWait::kJoiners, 0);
  EXPECT_EQ(status.Get().until, until);
}

TEST(WaitStatusTest, TheStoreErrorCountsOnlyWhileWaitingForTheStore) {
  WaitStatus status;
  status.SetStoreError(absl::UnavailableError("connection refused"));
  EXPECT_EQ(status.StoreUnreached(), "");
  status.Set(RdzvWait::kStore);
  EXPECT_EQ(status.StoreUnreached(), "connection refused");
  EXPECT_EQ(status.Get().store_error, "connection refused");
  status.Set(RdzvWait::kJoiners, 0);
  EXPECT_EQ(status.StoreUnreached(), "");
}

}  // namespace
}  // namespace distjob
