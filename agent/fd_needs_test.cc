#include "agent/fd_needs.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(FdNeedsTest, AStandaloneWorkerNeedsItsTwoConnections) {
  LaunchOptions launch;
  launch.standalone = true;
  launch.nproc = 1;
  const StoreNeeds needs = NeedsOf(launch);
  EXPECT_EQ(needs.worker_store_connections, 2u);
  EXPECT_EQ(needs.rendezvous_store_connections, 0u);
}

TEST(FdNeedsTest, AC10dJobNeedsItsLargestRound) {
  LaunchOptions launch;
  launch.min_nodes = 1;
  launch.max_nodes = 12288;
  launch.nproc = 8;
  launch.rdzv_backend = RdzvBackend::kC10d;
  const StoreNeeds needs = NeedsOf(launch);
  EXPECT_EQ(needs.worker_store_connections, 12288u * 8 * 2);
  EXPECT_EQ(needs.rendezvous_store_connections, 12288u);
}

TEST(FdNeedsTest, EtcdHostsNoStore) {
  LaunchOptions launch;
  launch.max_nodes = 4;
  launch.nproc = 2;
  launch.rdzv_backend = RdzvBackend::kEtcdV3;
  const StoreNeeds needs = NeedsOf(launch);
  EXPECT_EQ(needs.worker_store_connections, 16u);
  EXPECT_EQ(needs.rendezvous_store_connections, 0u);
}

TEST(FdNeedsTest, WorkerRankZerosStoreNeedsNothingOfTheAgent) {
  LaunchOptions launch;
  launch.max_nodes = 4;
  launch.nproc = 2;
  launch.rdzv_backend = RdzvBackend::kC10d;
  launch.worker_store_agent = false;
  const StoreNeeds needs = NeedsOf(launch);
  EXPECT_EQ(needs.worker_store_connections, 0u);
  EXPECT_EQ(needs.rendezvous_store_connections, 4u);
}

}  // namespace
}  // namespace distjob
