#include "rendezvous/standalone_rendezvous.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// Counts what the rendezvous asks of the workers' store.
class CountingWorkerStore : public WorkerStoreHost {
 public:
  absl::StatusOr<int> Serve(const std::string&, int port) override {
    asked_port = port;
    return port != 0 ? port : 4242;
  }
  void Stop() override {}
  absl::Status AllowMembers(const std::vector<std::string>&, absl::Duration,
                            const std::function<bool()>&,
                            MemberAdmission*) override {
    return absl::OkStatus();
  }
  absl::Status Clear() override {
    ++clears;
    return absl::OkStatus();
  }
  int clears = 0;
  int asked_port = -1;
};

TEST(StandaloneRendezvousTest, EachAttemptGetsAClearedStore) {
  auto store = std::make_shared<CountingWorkerStore>();
  StandaloneRendezvous rdzv("", "", store);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    auto round = rdzv.Next(2);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ(round->master_port, 4242);
    EXPECT_TRUE(round->use_agent_store);
    EXPECT_EQ(store->clears, attempt);
  }
}

// An explicit --master-port is where the workers' store listens, and
// without the agent's store, the port the workers get.
TEST(StandaloneRendezvousTest, AnExplicitMasterPortIsHonoured) {
  auto store = std::make_shared<CountingWorkerStore>();
  StandaloneRendezvous served("", "", store, 29555);
  auto round = served.Next(1);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(store->asked_port, 29555);
  EXPECT_EQ(round->master_port, 29555);
  StandaloneRendezvous any("", "", store);
  ASSERT_TRUE(any.Next(1).ok());
  EXPECT_EQ(store->asked_port, 0);
  StandaloneRendezvous workers("", "", nullptr, 29556);
  round = workers.Next(1);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->master_port, 29556);
}

TEST(StandaloneRendezvousTest, RunIdsAreFresh) {
  EXPECT_NE(RandomRunId(), RandomRunId());
}

}  // namespace
}  // namespace distjob
