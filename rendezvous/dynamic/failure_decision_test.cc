// How the nodes agree on a worker failure: the claim, the failure a node
// offers as the root cause, and how a node that followed the claim learns
// the job ended.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/dynamic/dynamic_rendezvous_testing.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

TEST(FailureDecisionTest, TheFirstOfferOfARoundStays) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 3, 3, 3);
  FormRound(nodes);
  constexpr auto kRoot = OfferedFailureKind::kRootCause;
  EXPECT_EQ(nodes[0]->OfferedFailure(kRoot), std::nullopt);
  nodes[1]->OfferFailure(kRoot, "ValueError on n1");
  nodes[2]->OfferFailure(kRoot, "KeyError on n2");
  for (auto& node : nodes) {
    EXPECT_EQ(node->OfferedFailure(kRoot), "ValueError on n1");
  }
}

// A follower's store: the join's own watches (on `joiner`'s thread) are
// held until the store is gone, and the store goes as soon as this node
// marks the job's end as read, as the store's host that ended the job
// does once every node has read why. Once `formed`, the monitor's watch
// is held open until something changes, rather than for its lease: it is
// then surely in flight when the job ends.
class HostLeavesOnceEndReadStore : public LocalStore {
 public:
  explicit HostLeavesOnceEndReadStore(StoreCore* core) : LocalStore(core) {}
  std::atomic<std::thread::id> joiner{};
  absl::Notification joiner_waits;
  std::atomic<bool> formed{false};
  absl::Notification monitor_watches;

  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    if (gone_.HasBeenNotified()) return Gone();
    auto set = LocalStore::MultiSet(kvs, ttl);
    for (const auto& kv : kvs) {
      if (kv.first.find("/seen-end/") != std::string::npos) gone_.Notify();
    }
    return set;
  }
  absl::StatusOr<StoreListing> ListPage(const std::string& prefix,
                                        const std::string& start_after,
                                        size_t limit) override {
    if (gone_.HasBeenNotified()) return Gone();
    return LocalStore::ListPage(prefix, start_after, limit);
  }
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    if (std::this_thread::get_id() == joiner.load()) {
      if (!joiner_waits.HasBeenNotified()) joiner_waits.Notify();
      gone_.WaitForNotificationWithTimeout(absl::Seconds(30));
    } else if (formed) {
      if (!monitor_watches.HasBeenNotified()) monitor_watches.Notify();
      timeout = absl::Seconds(30);
    }
    if (gone_.HasBeenNotified()) return Gone();
    return LocalStore::WatchAny(prefixes, after_revision, timeout);
  }

 private:
  static absl::Status Gone() { return absl::UnavailableError("store gone"); }
  absl::Notification gone_;
};

// The follower's monitor reads the job's end first and marks it read; the
// host then takes the store away before the follower's join reads it.
// The join still ends with the job (its reason), not with a store to wait
// for until join_timeout.
TEST(FailureDecisionTest, AFollowerLearnsTheEndItsMonitorRead) {
  StoreCore core;
  auto store = std::make_unique<HostLeavesOnceEndReadStore>(&core);
  HostLeavesOnceEndReadStore* follower_store = store.get();
  Nodes nodes;
  nodes.push_back(
      std::make_unique<DynamicRendezvous>(Options(0, 2, 2), std::move(store)));
  nodes.push_back(std::make_unique<DynamicRendezvous>(
      Options(1, 2, 2), std::make_unique<LocalStore>(&core)));
  FormRound(nodes);
  follower_store->formed = true;
  ASSERT_TRUE(follower_store->monitor_watches.WaitForNotificationWithTimeout(
      absl::Seconds(10)));
  ASSERT_TRUE(nodes[1]->ClaimFailure());
  ASSERT_FALSE(nodes[0]->ClaimFailure());
  absl::StatusOr<RendezvousResult> next;
  const absl::Time start = absl::Now();
  std::thread follower([&] {
    follower_store->joiner = std::this_thread::get_id();
    next = nodes[0]->Next(1);
  });
  ASSERT_TRUE(follower_store->joiner_waits.WaitForNotificationWithTimeout(
      absl::Seconds(10)));
  nodes[1]->SetEndReason("permanent exit_code=1; error: loss is NaN");
  nodes[1]->Shutdown(false);
  follower.join();
  ASSERT_FALSE(next.ok());
  EXPECT_TRUE(absl::IsAborted(next.status())) << next.status();
  EXPECT_NE(next.status().message().find("loss is NaN"), std::string::npos)
      << next.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace distjob
