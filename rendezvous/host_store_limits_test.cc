#include "rendezvous/host_store_limits.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/rdzv_keys.h"

namespace distjob {
namespace {

TEST(HostStoreLimitsTest, SmallJobsKeepTheDefaults) {
  const StoreLimits defaults;
  const StoreLimits small = HostStoreLimits(64);
  EXPECT_EQ(small.max_waiter_bytes, defaults.max_waiter_bytes);
  EXPECT_EQ(small.max_waiters, defaults.max_waiters);
  EXPECT_EQ(small.max_total_bytes, defaults.max_total_bytes);
  EXPECT_EQ(small.max_value_bytes, defaults.max_value_bytes);
}

// Every node of a 16,384-node round parks a watch while it waits, and its
// monitor another once it holds the round: the default budget holds fewer.
TEST(HostStoreLimitsTest, LargeJobsGetTwoWaitsPerNode) {
  const StoreLimits big = HostStoreLimits(16384);
  EXPECT_GE(big.max_waiter_bytes, 2 * 16384 * kBytesPerWait);
  EXPECT_GE(big.max_waiters, 2u * 16384);
  EXPECT_GE(HostStoreLimits(100000).max_waiters, 200000u);
  EXPECT_LT(StoreLimits().max_waiter_bytes, 2 * 16384 * kBytesPerWait);
}

// A member's watch, and its read of its rank and the master's records after
// the close, with a run id and node names of 100 characters, as the store
// counts them, are within what the budget gives each wait.
TEST(HostStoreLimitsTest, AMembersWatchFitsItsShareOfTheBudget) {
  const RdzvKeys keys(std::string(100, 'r'));
  const std::string node(100, 'n');
  const std::vector<std::string> others = {keys.WaitingPrefix(),
                                           keys.Alive(node)};
  EXPECT_LE(
      StoreCore::WaiterBytes(others, keys.State(), StoreCore::kServerCallBytes),
      kBytesPerWait);
  const std::string closer(100, 'c');
  EXPECT_LE(StoreCore::WaiterBytes(
                {keys.Rank(1 << 20, closer, node), keys.Master(1 << 20)}, "",
                StoreCore::kServerCallBytes),
            kBytesPerWait);
}

// A small job's store answers from one thread (no hand-off per call); a
// large one splits its calls in flight over queues (store_server.cc).
TEST(HostStoreLimitsTest, QueuesGrowWithTheJobAndAreBounded) {
  EXPECT_EQ(HostStoreLimits(1).completion_queues, 1u);
  EXPECT_EQ(HostStoreLimits(2048).completion_queues, 1u);
  EXPECT_EQ(HostStoreLimits(4096).completion_queues, 2u);
  EXPECT_EQ(HostStoreLimits(16384).completion_queues, kMaxQueues);
  EXPECT_EQ(HostStoreLimits(100000).completion_queues, kMaxQueues);
  EXPECT_EQ(HostStoreLimits(-1).completion_queues, 1u);
}

}  // namespace
}  // namespace distjob
