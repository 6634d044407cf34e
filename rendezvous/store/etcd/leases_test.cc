// The job lease, its adoption and keep-alive, TTL'd keys and their
// renewal, and the last agent out, against a real etcd.
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
#include "rendezvous/store/etcd/testing.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {
namespace {

// Many threads' first calls on one client adopt one job lease between
// them: one grant for the job and one for this client's holder record.
TEST_F(EtcdStoreTest, ConcurrentFirstCallsOfAClientGrantOneJobLease) {
  auto store = Open("job");
  const int64_t grants = Requests("LeaseGrant", "Lease");
  ASSERT_GE(grants, 0);
  constexpr int kThreads = 32;
  absl::Mutex mu;
  int arrived = 0;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      {
        absl::MutexLock lock(&mu);
        ++arrived;
        mu.Await(absl::Condition(
            +[](int* n) { return *n == kThreads; }, &arrived));
      }
      if (store->Set(absl::StrCat("k", t), "v").ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads);
  EXPECT_EQ(Requests("LeaseGrant", "Lease") - grants, 2);
  EXPECT_EQ(*store->NumKeys(), kThreads);
}

// Calls that arrive while another call adopts the job lease wait for its
// outcome, each within its own deadline, and share its failure instead of
// redoing the adoption one after another.
TEST_F(EtcdStoreTest, QueuedFirstCallsShareOneAdoptionWithinTheirDeadlines) {
  Faults faults;
  {
    absl::MutexLock lock(&faults.mu);
    faults.hold_grants = true;
  }
  auto store = Open("job", "", &faults);
  absl::Status adopter;
  std::thread first([&] { adopter = store->Set("a", "v").status(); });
  EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
    f->mu.AssertHeld();
    return f->held == 1;
  }));
  // A waiter that ignored its deadline would wait for the grant: released
  // after 20 s unless the waiter is back before.
  absl::Notification back;
  std::thread releaser([&] {
    if (!back.WaitForNotificationWithTimeout(absl::Seconds(20))) {
      absl::MutexLock lock(&faults.mu);
      faults.released = true;
    }
  });
  absl::Status waited;
  const absl::Time start = absl::Now();
  {
    ScopedCallDeadline deadline(start + absl::Milliseconds(300));
    waited = store->Set("b", "v").status();
  }
  const absl::Duration took = absl::Now() - start;
  back.Notify();
  releaser.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_LT(took, absl::Seconds(5));
  constexpr int kWaiters = 8;
  std::vector<absl::Status> results(kWaiters);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      results[i] = store->Set(absl::StrCat("w", i), "v").status();
    });
  }
  // Every waiter is parked on the adoption before it fails.
  EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
    f->mu.AssertHeld();
    return f->lease_waits == 1 + kWaiters;
  }));
  {
    absl::MutexLock lock(&faults.mu);
    faults.released = true;
    faults.hold_grants = false;
  }
  first.join();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(adopter.code(), absl::StatusCode::kPermissionDenied) << adopter;
  for (const auto& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  }
  {
    absl::MutexLock lock(&faults.mu);
    EXPECT_EQ(faults.held, 1);
  }
  // A later call adopts again.
  ASSERT_TRUE(store->Set("c", "v").ok());
  EXPECT_EQ(*store->Get("c", absl::ZeroDuration()), "v");
}

// An adoption that failed only because its caller's deadline passed is not
// the failure of a waiter with more time: that one adopts the lease itself.
TEST_F(EtcdStoreTest, AWaiterWithMoreTimeThanTheAdopterAdoptsItself) {
  Faults faults;
  {
    absl::MutexLock lock(&faults.mu);
    faults.hold_grants = true;
  }
  auto store = Open("job", "", &faults);
  const absl::Time adopter_deadline = absl::Now() + absl::Milliseconds(300);
  absl::Status adopter;
  std::thread first([&] {
    ScopedCallDeadline deadline(adopter_deadline);
    adopter = store->Set("a", "v").status();
  });
  absl::Status waiter;
  std::thread second([&] {
    EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
      f->mu.AssertHeld();
      return f->held == 1;
    }));
    waiter = store->Set("b", "v").status();
  });
  EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
    f->mu.AssertHeld();
    return f->lease_waits == 1;
  }));
  // The held grant ends only once the adopter's deadline has passed.
  while (absl::Now() <= adopter_deadline) {
    absl::SleepFor(adopter_deadline - absl::Now() + absl::Milliseconds(1));
  }
  {
    absl::MutexLock lock(&faults.mu);
    faults.released = true;
    faults.hold_grants = false;
  }
  first.join();
  second.join();
  EXPECT_FALSE(adopter.ok());
  EXPECT_TRUE(waiter.ok()) << waiter;
  EXPECT_EQ(*store->Get("b", absl::ZeroDuration()), "v");
}

TEST_F(EtcdStoreTest, TtlKeysExpireOnEtcdsClockAndTheWatchSeesIt) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("alive/n1", "x", absl::Seconds(1)).ok());
  auto listing = store->List("alive/");
  ASSERT_EQ(listing->entries.size(), 1u);
  EXPECT_GT(listing->entries[0].ttl_left, absl::ZeroDuration());
  EXPECT_LE(listing->entries[0].ttl_left, absl::Seconds(2));
  EXPECT_LT(listing->entries[0].age, absl::Seconds(2));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  int64_t rev = listing->revision;
  while (*store->Check({"alive/n1"}) && absl::Now() < deadline) {
    auto w = store->Watch("alive/", rev, deadline - absl::Now());
    ASSERT_TRUE(w.ok());
    rev = w->second;
  }
  EXPECT_FALSE(*store->Check({"alive/n1"}));
}

// Heartbeats rewrite ctl/alive/<node> with the value it holds, under the
// ctl/ prefix every node's monitor watches: each must be a lease renewal
// that wakes nobody, or N nodes wake each other N times a heartbeat.
TEST_F(EtcdStoreTest, RenewingATtlKeyWithItsValueWakesNoWatcher) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(5)).ok());
  auto listing = store->List("ctl/");
  ASSERT_TRUE(listing.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(5)).ok());
  }
  auto quiet = store->Watch("ctl/", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->first);
  EXPECT_EQ(*store->Get("ctl/alive/n1", absl::ZeroDuration()), "x");
  // Another value is a change.
  ASSERT_TRUE(store->Set("ctl/alive/n1", "y", absl::Seconds(5)).ok());
  auto changed = store->Watch("ctl/", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed->first);
  // A key another client deleted comes back with the next heartbeat.
  auto other = Open("job");
  ASSERT_EQ(*other->Delete({"ctl/alive/n1"}), 1);
  ASSERT_TRUE(store->Set("ctl/alive/n1", "y", absl::Seconds(5)).ok());
  EXPECT_EQ(*other->Get("ctl/alive/n1", absl::ZeroDuration()), "y");
  // A renewed key still expires with its lease once renewals stop: the
  // writer leaving revokes it at once.
  store->Close();
  EXPECT_FALSE(*other->Check({"ctl/alive/n1"}));
}

// Every node's heartbeat renews its lease: a message on the client's one
// long-lived keep-alive stream, not a stream per renewal (4,096 simulated
// nodes made etcd set up and tear down 4,096 streams a second). A stream
// that breaks is opened again.
TEST_F(EtcdStoreTest, RenewalsShareOneKeepAliveStreamReopenedAfterALoss) {
  const std::string streams =
      "grpc_server_started_total{grpc_method=\"LeaseKeepAlive\","
      "grpc_service=\"etcdserverpb.Lease\",grpc_type=\"bidi_stream\"}";
  auto store = Open("job");
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  const int64_t before = std::max<int64_t>(0, Metric(streams));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  }
  // (The job lease's own keep-alive may have opened it already.)
  EXPECT_LE(Metric(streams) - before, 1);
  auto listing = store->List("ctl/");
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->entries.size(), 1u);
  ASSERT_NO_FATAL_FAILURE(Restart());
  // The stream broke with etcd: the next renewals go on a new one.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status renewed;
  do {
    renewed = store->Set("ctl/alive/n1", "x", absl::Seconds(30)).status();
  } while (!renewed.ok() && absl::Now() < deadline);
  ASSERT_TRUE(renewed.ok()) << renewed;
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  EXPECT_EQ(*store->Get("ctl/alive/n1", absl::ZeroDuration()), "x");
  // The restarted etcd counts from 0: one stream, or two where the first
  // met etcd still starting.
  EXPECT_GE(Metric(streams), 1);
  EXPECT_LE(Metric(streams), 2);
  auto quiet = store->Watch("ctl/", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->first) << "a renewal rewrote the key";
}

// A renewal whose caller gave up may still be answered: that answer is its
// own, not the next renewal's (which would then count its lease renewed
// from its own start, before etcd renewed it).
TEST_F(EtcdStoreTest, ALateKeepAliveAnswerIsNotTakenForTheNextRenewals) {
  Faults faults;
  auto store = Open("job", "", &faults);
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  const int64_t lease = RawLease("/distjob/job/kv/ctl/alive/n1");
  ASSERT_NE(lease, 0);
  {
    absl::MutexLock lock(&faults.mu);
    faults.hold_lease = lease;
  }
  std::thread renewer;
  // Whatever fails below: nothing stays held (the store's reader thread
  // would block its Close) and the renewer is joined.
  absl::Cleanup unhold = [&] {
    {
      absl::MutexLock lock(&faults.mu);
      faults.hold_lease = 0;
    }
    if (renewer.joinable()) renewer.join();
  };
  auto release = [&](int n) {
    absl::MutexLock lock(&faults.mu);
    faults.permits += n;
  };
  {
    // Its answer is held past its caller's deadline.
    ScopedCallDeadline soon(absl::Now() + absl::Milliseconds(300));
    EXPECT_FALSE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  }
  ASSERT_TRUE(faults.AwaitFor(+[](Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   f->mu) { return f->answers_arrived == 1; }));
  std::atomic<bool> second_done{false};
  absl::Status second;
  renewer = std::thread([&] {
    second = store->Set("ctl/alive/n1", "x", absl::Seconds(30)).status();
    second_done = true;
  });
  ASSERT_TRUE(faults.AwaitFor(+[](Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   f->mu) { return f->renewals_sent == 2; }));
  // The first answer goes through; the second renewal's own is held.
  release(1);
  ASSERT_TRUE(faults.AwaitFor(+[](Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   f->mu) { return f->answers_arrived == 2; }));
  // Given time to finish, it does not: its own answer is still held.
  EXPECT_FALSE(
      WaitFor([&] { return second_done.load(); }, absl::Milliseconds(300)))
      << "answered by the first renewal's answer";
  release(1);
  renewer.join();
  EXPECT_TRUE(second.ok()) << second;
}

// A node's heartbeat adds its waiting key to its alive key while it waits
// for a round: the added key goes under the lease the heartbeat renews,
// not a lease of its own (a grant, a Raft commit, per node).
TEST_F(EtcdStoreTest, AKeyAddedToARenewedHeartbeatSharesItsLease) {
  auto store = Open("job");
  auto other = Open("job");
  ASSERT_TRUE(store->Set("ctl/alive/n1", "1", absl::Seconds(30)).ok());
  ASSERT_TRUE(store->Set("ctl/alive/n1", "1", absl::Seconds(30)).ok());
  ASSERT_TRUE(other->Set("unrelated", "x").ok());
  const int64_t grants = Requests("LeaseGrant", "Lease");
  ASSERT_GE(grants, 0);
  ASSERT_TRUE(store
                  ->MultiSet({{"ctl/alive/n1", "1"}, {"ctl/waiting/n1", "1"}},
                             absl::Seconds(30))
                  .ok());
  ASSERT_TRUE(store
                  ->MultiSet({{"ctl/alive/n1", "1"}, {"ctl/waiting/n1", "1"}},
                             absl::Seconds(30))
                  .ok());
  EXPECT_EQ(Requests("LeaseGrant", "Lease") - grants, 0);
  EXPECT_EQ(*other->Get("ctl/waiting/n1", absl::ZeroDuration()), "1");
  // Both go with the lease when their writer leaves.
  store->Close();
  EXPECT_FALSE(*other->Check({"ctl/alive/n1"}));
  EXPECT_FALSE(*other->Check({"ctl/waiting/n1"}));
}

TEST_F(EtcdStoreTest, LastAgentOutRevokesTheJobsKeysSoARerunStartsClean) {
  auto first = Open("job");
  auto second = Open("job");
  ASSERT_TRUE(first->Set("state", "round 3").ok());
  ASSERT_TRUE(second->Add("count", 1).ok());
  first->Close();
  // Keys written by an agent that left stay while the job lives on.
  EXPECT_EQ(*second->Get("state", absl::ZeroDuration()), "round 3");
  second->Close();
  auto rerun = Open("job");
  EXPECT_EQ(*rerun->NumKeys(), 0);
  ASSERT_TRUE(rerun->Set("state", "round 0").ok());
  EXPECT_EQ(*rerun->Get("state", absl::ZeroDuration()), "round 0");
}

// Closed between the adoption's registration as a holder and its record of
// the leases: the adoption must start no keep-alive thread that Close has
// already passed (never joined: std::terminate), and its holder lease must
// be revoked, not left to keep the job's keys alive.
TEST_F(EtcdStoreTest, CloseDuringAJobLeaseAdoptionRevokesItsHolderLease) {
  auto o = ParseEtcdOptions(endpoint_, "", "job");
  ASSERT_TRUE(o.ok()) << o.status();
  o->rpc_timeout = absl::Seconds(10);
  EtcdStore* store = nullptr;
  std::thread closer;
  bool refused = false;
  etcd::Hooks hooks;
  hooks.adopted = [&] {
    closer = std::thread([&] { store->Close(); });
    // Close has begun once this thread's calls are refused.
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!refused && absl::Now() < deadline) {
      refused = absl::IsCancelled(store->NumKeys().status());
    }
  };
  auto opened = EtcdStoreTesting::Connect(*o, hooks);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store = opened->get();
  auto set = store->Set("k", "v");
  closer.join();
  EXPECT_TRUE(refused);
  EXPECT_TRUE(absl::IsCancelled(set.status())) << set.status();
  EXPECT_EQ(RawCount("/distjob/job/agent/holders/"), 0);
  EXPECT_EQ(RawCount("/distjob/job/kv/"), 0);
}

}  // namespace
}  // namespace distjob
