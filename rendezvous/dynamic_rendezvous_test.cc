#include "rendezvous/dynamic_rendezvous.h"

#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "rendezvous/store_core.h"

namespace distjob {
namespace {

DynamicRendezvousOptions Options(int i, int min, int max) {
  DynamicRendezvousOptions o;
  o.run_id = "job";
  o.min_nodes = min;
  o.max_nodes = max;
  o.node = "n" + std::to_string(i);
  o.addr = "127.0.0.1";
  o.config.keep_alive_interval = absl::Milliseconds(100);
  o.config.keep_alive_max_attempt = 3;
  o.config.last_call_timeout = absl::Milliseconds(300);
  o.config.join_timeout = absl::Seconds(20);
  return o;
}

TEST(DynamicRendezvousTest, FourNodesFormOneRoundWithDistinctRanks) {
  StoreCore core;
  ASSERT_TRUE(
      core.MultiSet({{"rdzv/job/host", "n2"}}, absl::ZeroDuration()).ok());
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 4, 4), std::make_unique<LocalStore>(&core)));
  }
  std::vector<RendezvousResult> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto r = nodes[i]->Next(2);
      ASSERT_TRUE(r.ok()) << r.status();
      results[i] = *r;
    });
  }
  for (auto& t : threads) t.join();
  std::set<int> ranks, base;
  for (const auto& r : results) {
    ranks.insert(r.group_rank);
    base.insert(r.base_rank);
    EXPECT_EQ(r.group_world_size, 4);
    EXPECT_EQ(r.world_size, 8);
    EXPECT_EQ(r.master_port, results[0].master_port);
  }
  EXPECT_EQ(ranks.size(), 4u);
  EXPECT_EQ(base, (std::set<int>{0, 2, 4, 6}));
  EXPECT_EQ(results[2].group_rank, 0);  // the store host
}

TEST(DynamicRendezvousTest, DeadPeerIsNoticedAndSurvivorsReform) {
  StoreCore core;
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 2, 3), std::make_unique<LocalStore>(&core)));
  }
  absl::Notification changed;
  nodes[0]->SetOnMembershipChange([&] { changed.Notify(); });
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { ASSERT_TRUE(nodes[i]->Next(1).ok()); });
  }
  for (auto& t : threads) t.join();
  nodes[2].reset();  // stops its heartbeat without leaving: a crash
  ASSERT_TRUE(changed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(nodes[0]->MembershipChanged());
  threads.clear();
  std::vector<RendezvousResult> results(2);
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      auto r = nodes[i]->Next(1);
      ASSERT_TRUE(r.ok()) << r.status();
      results[i] = *r;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0].group_world_size, 2);
  EXPECT_EQ(results[0].round, 1);
  // Ranks stay where membership allows.
  EXPECT_NE(results[0].group_rank, results[1].group_rank);
}

TEST(DynamicRendezvousTest, FailureRestartIsCarriedToEveryNode) {
  StoreCore core;
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 2, 2), std::make_unique<LocalStore>(&core)));
  }
  absl::Notification changed;
  nodes[1]->SetOnMembershipChange([&] { changed.Notify(); });
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { ASSERT_TRUE(nodes[i]->Next(1).ok()); });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  std::vector<RendezvousResult> results(2);
  nodes[0]->NoteFailureRestart(1);
  threads.emplace_back([&] { results[0] = *nodes[0]->Next(1); });
  ASSERT_TRUE(changed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  threads.emplace_back([&] { results[1] = *nodes[1]->Next(1); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0].restart_count, 1);
  EXPECT_EQ(results[1].restart_count, 1);
}

// A worker that loses its peers fails too; only the node whose worker failed
// first decides (restart or end), the others follow it.
TEST(DynamicRendezvousTest, OnlyTheFirstFailureOfARoundIsTheRootCause) {
  StoreCore core;
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 2, 2), std::make_unique<LocalStore>(&core)));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { ASSERT_TRUE(nodes[i]->Next(1).ok()); });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(nodes[1]->ClaimFailure());
  EXPECT_FALSE(nodes[0]->ClaimFailure());
}

// The node that ends the job tells the others why.
TEST(DynamicRendezvousTest, EndReasonReachesTheOtherNodes) {
  StoreCore core;
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 2, 2), std::make_unique<LocalStore>(&core)));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { ASSERT_TRUE(nodes[i]->Next(1).ok()); });
  }
  for (auto& t : threads) t.join();
  nodes[0]->SetEndReason("permanent exit_code=1; error: loss is NaN");
  nodes[0]->Shutdown(false);
  auto next = nodes[1]->Next(1);
  ASSERT_FALSE(next.ok());
  EXPECT_TRUE(absl::IsAborted(next.status())) << next.status();
  EXPECT_NE(next.status().message().find("node n0 exited: permanent "
                                         "exit_code=1; error: loss is NaN"),
            std::string::npos)
      << next.status();
}

}  // namespace
}  // namespace distjob
