// Writes the other nodes read, failing once: each is written again, not
// dropped (issue 38, "no silent discards").
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/thread_state_testing.h"
#include "gtest/gtest.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/dynamic/dynamic_rendezvous_testing.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

bool Exists(StoreCore* core, const std::string& key) {
  auto listing = core->List(key);
  return listing.ok() && !listing->entries.empty();
}

// A LocalStore whose first write (or delete) of `key` fails, Unavailable.
class FailsOnceStore : public LocalStore {
 public:
  enum class Op { kWrite, kDelete };
  FailsOnceStore(StoreCore* core, std::string key, Op op)
      : LocalStore(core), key_(std::move(key)), op_(op) {}
  int failed() const { return failed_; }
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    for (const auto& kv : kvs) {
      if (op_ == Op::kWrite && kv.first == key_ && FailNow()) {
        return Refused();
      }
    }
    return LocalStore::MultiSet(kvs, ttl);
  }
  absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (op_ == Op::kDelete && k == key_ && FailNow()) return Refused();
    }
    return LocalStore::Delete(keys);
  }

 private:
  bool FailNow() {
    int expected = 0;
    return failed_.compare_exchange_strong(expected, 1);
  }
  absl::Status Refused() const {
    return absl::UnavailableError("refused once, by the test: " + key_);
  }
  const std::string key_;
  const Op op_;
  std::atomic<int> failed_{0};
};

// A node that joined withdraws its ask to join; the withdrawal failing
// left the ask for as long as the lease was renewed (an etcd renewal
// keeps a lease's keys), and the members kept seeing a node asking to
// join. The next renewal deletes it.
TEST(DynamicRendezvousStoreFailureTest, AFailedWithdrawalIsRetried) {
  StoreCore core;
  Nodes members;
  for (int i = 0; i < 2; ++i) {
    members.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 2, 3), std::make_unique<LocalStore>(&core)));
  }
  std::atomic<int> changes{0};
  members[0]->SetOnMembershipChange([&] { ++changes; });
  FormRound(members);
  const std::string ask = RdzvKeys("job").Waiting("n2");
  auto failing =
      std::make_unique<FailsOnceStore>(&core, ask, FailsOnceStore::Op::kDelete);
  FailsOnceStore* store = failing.get();
  DynamicRendezvousOptions o = Options(2, 2, 3);
  o.heartbeat_thread = false;  // renewed by the test
  // A lease (and so the ask's TTL on this store) far longer than the test.
  o.config.keep_alive_interval = absl::Seconds(20);
  DynamicRendezvous late(o, std::move(failing));
  absl::StatusOr<RendezvousResult> joined;
  std::thread joining([&] { joined = late.Next(1); });
  ASSERT_TRUE(WaitFor([&] { return changes > 0; }));
  FormRound(members);
  joining.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->group_world_size, 3);
  ASSERT_EQ(store->failed(), 1) << "the withdrawal was not refused";
  ASSERT_TRUE(Exists(&core, ask));
  late.RenewLease();
  EXPECT_FALSE(Exists(&core, ask)) << "the refused withdrawal was dropped";
}

// A node that read why the job ended marks it for the node that ended it
// (which waits for the marks until its lease is up). A mark refused once
// is written again by the next caller, here Shutdown.
TEST(DynamicRendezvousStoreFailureTest, AFailedEndMarkIsWrittenAgain) {
  StoreCore core;
  const std::string mark = RdzvKeys("job").SeenEnd("n1");
  Nodes nodes;
  nodes.push_back(std::make_unique<DynamicRendezvous>(
      Options(0, 2, 2), std::make_unique<LocalStore>(&core)));
  auto failing =
      std::make_unique<FailsOnceStore>(&core, mark, FailsOnceStore::Op::kWrite);
  FailsOnceStore* store = failing.get();
  nodes.push_back(std::make_unique<DynamicRendezvous>(Options(1, 2, 2),
                                                      std::move(failing)));
  absl::Notification changed;
  nodes[1]->SetOnMembershipChange([&] { changed.Notify(); });
  FormRound(nodes);
  nodes[0]->Shutdown(/*succeeded=*/false);  // ends the job
  ASSERT_TRUE(changed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(WaitFor([&] { return store->failed() == 1; }))
      << "the mark was not refused";
  nodes[1]->Shutdown(/*succeeded=*/false);
  EXPECT_TRUE(Exists(&core, mark)) << "the refused mark was dropped";
}

}  // namespace
}  // namespace distjob
