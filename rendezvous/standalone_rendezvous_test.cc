#include "rendezvous/standalone_rendezvous.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(StandaloneRendezvousTest, OneNodeRoundsWithFreshPorts) {
  StandaloneRendezvous rdzv("", "");
  auto first = rdzv.Next(2);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->group_rank, 0);
  EXPECT_EQ(first->group_world_size, 1);
  EXPECT_EQ(first->world_size, 2);
  EXPECT_EQ(first->master_addr, "127.0.0.1");
  EXPECT_GT(first->master_port, 0);
  EXPECT_EQ(first->run_id.size(), 32u);
  auto second = rdzv.Next(2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->round, 1);
  EXPECT_EQ(second->run_id, first->run_id);
}

TEST(StandaloneRendezvousTest, RunIdsAreFresh) {
  EXPECT_NE(RandomRunId(), RandomRunId());
}

}  // namespace
}  // namespace distjob
