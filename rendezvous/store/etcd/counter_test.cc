// Add against a real etcd: one write per add of one, exact reads, and
// adds whose answers were lost counted once.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/etcd_fixture.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/etcd/store.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {
namespace {

// N nodes joining a round add to one counter at once: each add is one
// write (and one write of the value), never a read and compare-and-swap
// that all but one of the racing writers lose and retry (O(N²) requests).
TEST_F(EtcdStoreTest, ConcurrentAddsOfOneTakeTwoWritesEachWithoutRetries) {
  constexpr int kClients = 4, kPerClient = 16, kAdds = kClients * kPerClient;
  std::vector<std::unique_ptr<EtcdStore>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Open("job"));
    // Each client's job lease first: not counted below.
    ASSERT_TRUE(clients.back()->Set(absl::StrCat("c", i), "x").ok());
  }
  // The counter exists (as after the round's first join).
  ASSERT_EQ(*clients[0]->Add("joined", 0), 0);
  const int64_t txns = Requests("Txn"), ranges = Requests("Range");
  ASSERT_GE(txns, 0);
  std::vector<int64_t> got(kAdds, -1);
  {
    absl::Mutex mu;
    int arrived = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kAdds; ++t) {
      threads.emplace_back([&, t] {
        {
          // All at once, as a round's nodes do.
          absl::MutexLock lock(&mu);
          ++arrived;
          mu.Await(absl::Condition(
              +[](int* n) { return *n == kAdds; }, &arrived));
        }
        auto r = clients[t % kClients]->Add("joined", 1);
        got[t] = r.ok() ? *r : -1;
      });
    }
    for (auto& t : threads) t.join();
  }
  std::sort(got.begin(), got.end());
  for (int i = 0; i < kAdds; ++i) ASSERT_EQ(got[i], i + 1);
  EXPECT_EQ(Requests("Txn") - txns, 2 * kAdds);
  EXPECT_EQ(Requests("Range") - ranges, 0);
  // Every add's result is readable once it returned.
  EXPECT_EQ(*clients[1]->Get("joined", absl::ZeroDuration()),
            absl::StrCat(kAdds));
  EXPECT_EQ(*clients[2]->Add("joined", 0), kAdds);
  // Other deltas, and writes that are not adds, keep TCPStore's counter.
  EXPECT_EQ(*clients[0]->Add("joined", -10), kAdds - 10);
  EXPECT_EQ(*clients[1]->Add("joined", 1), kAdds - 9);
  ASSERT_TRUE(clients[0]->Set("joined", "100").ok());
  EXPECT_EQ(*clients[1]->Add("joined", 1), 101);
  EXPECT_EQ(*clients[1]->Add("joined", 1), 102);
  EXPECT_EQ(*clients[0]->Get("joined", absl::ZeroDuration()), "102");
  EXPECT_EQ(*clients[0]->Delete({"joined"}), 1);
  EXPECT_EQ(*clients[2]->Add("joined", 1), 1);
  EXPECT_EQ(*clients[2]->Add("joined", 1), 2);
  ASSERT_TRUE(clients[3]->CompareSet("joined", "2", "7")->swapped);
  EXPECT_EQ(*clients[3]->Add("joined", 1), 8);
  EXPECT_EQ(*clients[3]->Append("joined", "0"), 2);
  EXPECT_EQ(*clients[0]->Add("joined", 1), 81);
  // The counters' own records are no keys of the store.
  EXPECT_EQ(*clients[0]->NumKeys(), kClients + 1);
}

// A counter's value write lags its add, and is lost with an adder that
// dies between its two writes: every read takes the count from the
// counter's sequence.
TEST_F(EtcdStoreTest, CounterReadsAreExactWhenAnAdderDiedBetweenItsWrites) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("other", "x").ok());
  ASSERT_EQ(*store->Add("joined", 1), 1);
  ASSERT_EQ(*store->Add("joined", 1), 2);
  AddOnlyToTheSequence("job", "joined");
  AddOnlyToTheSequence("job", "joined");
  EXPECT_EQ(*store->Get("joined", absl::ZeroDuration()), "4");
  auto values = store->MultiGet({"other", "joined"}, absl::ZeroDuration());
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"x", "4"}));
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->entries.size(), 2u);
  EXPECT_EQ(listing->entries[0].key, "joined");
  EXPECT_EQ(listing->entries[0].value, "4");
  auto page = store->ListPage("", "", 1);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].value, "4");
  // Compare-set compares with the exact count.
  auto r = store->CompareSet("joined", "2", "stale");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "4");
  r = store->CompareSet("joined", "", "absent");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "4");
  r = store->CompareSet("joined", "4", "10");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->swapped);
  EXPECT_EQ(*store->Get("joined", absl::ZeroDuration()), "10");
  EXPECT_EQ(*store->Add("joined", 1), 11);
  // Append appends to the exact count.
  ASSERT_EQ(*store->Add("c", 1), 1);
  ASSERT_EQ(*store->Add("c", 1), 2);
  AddOnlyToTheSequence("job", "c");
  EXPECT_EQ(*store->Append("c", "0"), 2);
  EXPECT_EQ(*store->Get("c", absl::ZeroDuration()), "30");
  EXPECT_EQ(*store->Add("c", 1), 31);
}

// A transport failure after an add committed (its answer lost) is retried
// by the client; the add must count once, whichever way it was applied.
TEST_F(EtcdStoreTest, AnAddWhoseAnswerWasLostCountsOnce) {
  Faults faults;
  auto store = Open("job", "", &faults, absl::Seconds(2));
  auto lose = [&](int n) {
    absl::MutexLock lock(&faults.mu);
    faults.lose = n;
    faults.lost = 0;
  };
  // The first add (a compare-and-swap).
  lose(1);
  EXPECT_EQ(*store->Add("n", 5), 5);
  // An add of one (a put of the sequence).
  lose(1);
  EXPECT_EQ(*store->Add("n", 1), 6);
  // Another delta (a compare-and-swap of the sequence).
  lose(1);
  EXPECT_EQ(*store->Add("n", 3), 9);
  {
    absl::MutexLock lock(&faults.mu);
    EXPECT_EQ(faults.lost, 1);
  }
  EXPECT_EQ(*store->Get("n", absl::ZeroDuration()), "9");
  // Every retry's answer lost until the call's budget is spent: the add
  // settles its outcome itself.
  lose(1000);
  EXPECT_EQ(*store->Add("n", 1), 10);
  {
    absl::MutexLock lock(&faults.mu);
    EXPECT_GT(faults.lost, 1);
    faults.lose = 0;
  }
  EXPECT_EQ(*store->Add("n", 0), 10);
  EXPECT_EQ(*store->Get("n", absl::ZeroDuration()), "10");
  // The markers of the four adds that were sent more than once stay; the
  // others' are gone once their adds returned.
  const int64_t kept = RawCount("/distjob/job/agent/adds/");
  EXPECT_EQ(kept, 4);
  EXPECT_EQ(*store->Add("n", 1), 11);
  EXPECT_EQ(*store->Add("n", 2), 13);
  EXPECT_EQ(RawCount("/distjob/job/agent/adds/"), kept);
}

// A transaction whose answer was lost may still be in flight at a member
// and commit after its add returned (a proposal etcd replays late): its
// marker stays, so the late copy applies nothing.
TEST_F(EtcdStoreTest, AnAttemptThatCommitsAfterItsAddReturnedCountsNothing) {
  Faults faults;
  auto store = Open("job", "", &faults, absl::Seconds(2));
  ASSERT_EQ(*store->Add("n", 5), 5);
  std::vector<etcdserverpb::TxnRequest> late;
  for (int64_t delta : {1, 3}) {
    {
      absl::MutexLock lock(&faults.mu);
      faults.lose = 1;
      faults.lost_txns.clear();
    }
    ASSERT_TRUE(store->Add("n", delta).ok());
    absl::MutexLock lock(&faults.mu);
    ASSERT_EQ(faults.lost_txns.size(), 1u);
    late.push_back(faults.lost_txns[0]);
  }
  ASSERT_EQ(*store->Add("n", 0), 9);
  for (const auto& txn : late) {
    etcdserverpb::TxnResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    ASSERT_TRUE(RawKv()->Txn(&ctx, txn, &resp).ok());
    EXPECT_FALSE(resp.succeeded());
  }
  EXPECT_EQ(*store->Add("n", 0), 9);
  EXPECT_EQ(*store->Get("n", absl::ZeroDuration()), "9");
}

}  // namespace
}  // namespace distjob
