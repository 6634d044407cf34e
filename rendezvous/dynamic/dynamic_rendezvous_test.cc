#include "rendezvous/dynamic/dynamic_rendezvous.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/thread_state_testing.h"
#include "gtest/gtest.h"
#include "rendezvous/dynamic/dynamic_rendezvous_testing.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/store/fake_store_clock.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

int64_t StoredRound(StoreCore* core) {
  const StoreListing listing = *core->List("rdzv/job/ctl/state");
  if (listing.entries.empty()) return -1;
  auto state = RdzvState::Decode(listing.entries[0].value);
  return state.ok() ? state->round : -1;
}

// Writes round `round`, open, as the job's state.
void SetOpenRound(StoreCore* core, int64_t round) {
  RdzvState open;
  open.round = round;
  LocalStore view(core);
  ASSERT_TRUE(view.Set("rdzv/job/ctl/state", open.Encode()).ok());
}

// Round `round`'s join counter as stored, or the read's error.
std::string JoinCount(StoreCore* core, int64_t round) {
  LocalStore view(core);
  auto v =
      view.Get(absl::StrCat("rdzv/job/joined/", round), absl::ZeroDuration());
  return v.ok() ? *v : v.status().ToString();
}

TEST(DynamicRendezvousTest, FourNodesFormOneRoundWithDistinctRanks) {
  StoreCore core;
  ASSERT_TRUE(
      core.MultiSet({{"rdzv/job/host", "n2"}}, absl::ZeroDuration()).ok());
  Nodes nodes = MakeNodes(&core, 4, 4, 4);
  std::vector<RendezvousResult> results = FormRound(nodes, 2);
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
  // Every join record was there at the close: the state names rank 0.
  auto state =
      RdzvState::Decode(core.List("rdzv/job/ctl/state")->entries.at(0).value);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->leader, "n2");
}

// Records each MultiGet's keys.
class GetRecordingStore : public LocalStore {
 public:
  GetRecordingStore(StoreCore* core, absl::Mutex* mu,
                    std::vector<std::vector<std::string>>* gets)
      : LocalStore(core), mu_(mu), gets_(gets) {}
  absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override {
    {
      absl::MutexLock lock(mu_);
      gets_->push_back(keys);
    }
    return LocalStore::MultiGet(keys, timeout);
  }

 private:
  absl::Mutex* mu_;
  std::vector<std::vector<std::string>>* gets_;
};

// A store that refuses to write the master's record: rank 0 failing
// between the close and its record.
class NoMasterStore : public LocalStore {
 public:
  using LocalStore::LocalStore;
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    for (const auto& kv : kvs) {
      if (absl::StartsWith(kv.first, "rdzv/job/master/")) {
        return absl::UnavailableError("rank 0 is gone");
      }
    }
    return LocalStore::MultiSet(kvs, ttl);
  }
};

// Rank 0's writes of the master record, and whether the workers' store
// record went in the same request; with `refuse_status_record`, a write
// of that record is refused (a store limit).
class MasterWritesStore : public LocalStore {
 public:
  MasterWritesStore(StoreCore* core, bool refuse_status_record)
      : LocalStore(core), refuse_(refuse_status_record) {}
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    bool master = false, status = false;
    for (const auto& kv : kvs) {
      master |= absl::StartsWith(kv.first, "rdzv/job/master/");
      status |= kv.first == "rdzv/job/worker-store";
    }
    if (status && refuse_) {
      ++refused;
      return absl::ResourceExhaustedError("over the store's limit");
    }
    if (master) {
      ++master_writes;
      with_status_record = status;
    }
    return LocalStore::MultiSet(kvs, ttl);
  }
  std::atomic<int> master_writes{0};
  std::atomic<int> refused{0};
  std::atomic<bool> with_status_record{false};

 private:
  const bool refuse_;
};

// The other members' reads wait for the master record, so rank 0 writes it
// with the workers' store record in one request.
TEST(DynamicRendezvousTest, RankZeroWritesTheMasterAndStatusRecordsAtOnce) {
  StoreCore core;
  auto owned = std::make_unique<MasterWritesStore>(&core, false);
  MasterWritesStore* store = owned.get();
  DynamicRendezvous node(Options(0, 1, 1), std::move(owned));
  ASSERT_TRUE(node.Next(1).ok());
  EXPECT_EQ(store->master_writes.load(), 1);
  EXPECT_TRUE(store->with_status_record.load());
  EXPECT_TRUE(core.Check({"rdzv/job/worker-store"}).value());
}

// Only `status` reads the workers' store record: when the store refuses
// it, the master record is still written and the round still forms.
TEST(DynamicRendezvousTest, ARefusedStatusRecordDoesNotFailTheRound) {
  StoreCore core;
  auto owned = std::make_unique<MasterWritesStore>(&core, true);
  MasterWritesStore* store = owned.get();
  DynamicRendezvous node(Options(0, 1, 1), std::move(owned));
  auto r = node.Next(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(store->refused.load(), 1);
  EXPECT_EQ(store->master_writes.load(), 1);
  EXPECT_FALSE(store->with_status_record.load());
  EXPECT_FALSE(core.Check({"rdzv/job/worker-store"}).value());
  EXPECT_TRUE(core.Check({"rdzv/job/master/0"}).value());
}

// When rank 0 never writes the master's record, the other members give up
// once close_timeout has passed, as a read of the record alone would.
TEST(DynamicRendezvousTest, MembersGiveUpOnAMissingMasterAfterCloseTimeout) {
  StoreCore core;
  ASSERT_TRUE(
      core.MultiSet({{"rdzv/job/host", "n0"}}, absl::ZeroDuration()).ok());
  Nodes nodes;
  for (int i = 0; i < 3; ++i) {
    DynamicRendezvousOptions o = Options(i, 3, 3);
    o.config.close_timeout = absl::Seconds(1);
    if (i == 0) {
      nodes.push_back(std::make_unique<DynamicRendezvous>(
          o, std::make_unique<NoMasterStore>(&core)));
    } else {
      nodes.push_back(std::make_unique<DynamicRendezvous>(
          o, std::make_unique<LocalStore>(&core)));
    }
  }
  std::vector<absl::Status> status(3);
  std::vector<absl::Duration> took(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      const absl::Time start = absl::Now();
      status[i] = nodes[i]->Next(1).status();
      took[i] = absl::Now() - start;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(status[0].ok());
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(status[i])) << status[i];
    EXPECT_GE(took[i], absl::Seconds(1));
    // One wait of close_timeout, not one per read.
    EXPECT_LT(took[i], absl::Milliseconds(1900)) << "n" << i;
  }
}

// Thousands of members read their place at once after a close: each but
// rank 0 reads its rank record and the master's in one request.
TEST(DynamicRendezvousTest, AMemberReadsItsPlaceAndTheMasterInOneRequest) {
  StoreCore core;
  ASSERT_TRUE(
      core.MultiSet({{"rdzv/job/host", "n0"}}, absl::ZeroDuration()).ok());
  absl::Mutex mu;
  std::vector<std::vector<std::string>> gets[3];
  Nodes nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, 3, 3),
        std::make_unique<GetRecordingStore>(&core, &mu, &gets[i])));
  }
  std::vector<RendezvousResult> results = FormRound(nodes);
  ASSERT_EQ(results[0].group_rank, 0);
  absl::MutexLock lock(&mu);
  for (int i = 1; i < 3; ++i) {
    int master_reads = 0;
    bool together = false;
    for (const auto& keys : gets[i]) {
      for (const auto& k : keys) {
        if (k == "rdzv/job/master/0") ++master_reads;
      }
      together |= keys.size() == 2 && keys[1] == "rdzv/job/master/0" &&
                  absl::StartsWith(keys[0], "rdzv/job/rank/0/");
    }
    EXPECT_EQ(master_reads, 1) << "n" << i;
    EXPECT_TRUE(together) << "n" << i;
    EXPECT_EQ(results[i].master_port, results[0].master_port);
  }
}

TEST(DynamicRendezvousTest, DeadPeerIsNoticedAndSurvivorsReform) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 3, 2, 3);
  absl::Notification changed[2];
  for (int i = 0; i < 2; ++i) {
    nodes[i]->SetOnMembershipChange([&, i] { changed[i].Notify(); });
  }
  FormRound(nodes);
  nodes[2].reset();  // stops its heartbeat without leaving: a crash
  // Only the member before it in rank order watches its lease; every
  // survivor hears of the loss all the same.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(changed[i].WaitForNotificationWithTimeout(absl::Seconds(10)));
    EXPECT_TRUE(nodes[i]->MembershipChanged());
  }
  std::vector<RendezvousResult> results = FormRound(nodes);
  EXPECT_EQ(results[0].group_world_size, 2);
  EXPECT_EQ(results[0].round, 1);
  // Ranks stay where membership allows.
  EXPECT_NE(results[0].group_rank, results[1].group_rank);
}

// A round of 100,000 nodes through the real close: 99,999 join records as
// each joiner writes them, then the last joiner closes the round (members,
// rank records, state) with the store's default limits enforced on every
// write. No value may grow with the job: the member list was one value of
// megabytes, over max_value_bytes.
TEST(DynamicRendezvousTest, HundredThousandNodeRoundFitsTheStoresLimits) {
  constexpr int kNodes = 100000;
  const StoreLimits limits;
  StoreCore core(limits);
  LocalStore store(&core);
  const RdzvKeys keys("job");
  DynamicRendezvousOptions o = Options(kNodes - 1, kNodes, kNodes);
  // The closer hosts the store: it is ranked first and publishes the
  // master's address itself.
  ASSERT_TRUE(store.Set(keys.Host(), o.node).ok());
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < kNodes - 1; ++i) {
    kvs.emplace_back(keys.Join(0, i + 1),
                     EncodeJoin({"n" + std::to_string(i), 8,
                                 "10.0." + std::to_string(i / 256 % 256) + "." +
                                     std::to_string(i % 256)}));
    if (kvs.size() == 1024 || i == kNodes - 2) {
      ASSERT_TRUE(store.MultiSet(kvs, absl::ZeroDuration()).ok());
      kvs.clear();
    }
  }
  ASSERT_TRUE(store.Add(keys.Joined(0), kNodes - 1).ok());
  DynamicRendezvous closer(o, std::make_unique<LocalStore>(&core));
  auto r = closer.Next(8);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->group_rank, 0);
  EXPECT_EQ(r->group_world_size, kNodes);
  EXPECT_EQ(r->world_size, 8 * kNodes);
  // A node learns its place from its own record: O(1) bytes.
  auto rec = store.Get(keys.Rank(0, o.node, "n41999"), absl::ZeroDuration());
  ASSERT_TRUE(rec.ok()) << rec.status();
  auto mine = DecodeRank(*rec);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->group_rank, 42000);  // after the host
  EXPECT_EQ(mine->base_rank, 8 * 42000);
  EXPECT_EQ(mine->next, "n42000");
  EXPECT_LT(rec->size(), 64u);
  // Every key and value within the store's limits; the member list in
  // chunks, whole again in rank order.
  auto all = store.List(keys.prefix());
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::pair<int64_t, std::string>> chunks;
  for (const auto& e : all->entries) {
    EXPECT_LE(e.key.size(), limits.max_key_bytes);
    EXPECT_LE(e.value.size(), limits.max_value_bytes) << e.key;
    if (auto first = keys.ParseMembers(e.key, 0, o.node); first.has_value()) {
      chunks.emplace_back(*first, e.value);
    }
  }
  EXPECT_GT(chunks.size(), 1u);
  auto members = AssembleMembers(chunks, kNodes);
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ((*members)[0].node, o.node);
  EXPECT_EQ((*members)[kNodes - 1].node, "n99998");
}

// Each member watches only the next one's lease: when neighbours die
// together, the first live member before them still sees it.
TEST(DynamicRendezvousTest, NeighboursDyingTogetherAreNoticedByTheSurvivors) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 5, 5, 5);
  std::vector<RendezvousResult> results = FormRound(nodes);
  // Kill the members at group ranks 1 and 2: rank 0 watches rank 1.
  std::vector<int> by_rank(5);
  for (int i = 0; i < 5; ++i) by_rank[results[i].group_rank] = i;
  absl::Notification changed[5];
  for (int r : {0, 3, 4}) {
    const int i = by_rank[r];
    nodes[i]->SetOnMembershipChange([&, i] { changed[i].Notify(); });
  }
  nodes[by_rank[1]].reset();
  nodes[by_rank[2]].reset();
  for (int r : {0, 3, 4}) {
    EXPECT_TRUE(
        changed[by_rank[r]].WaitForNotificationWithTimeout(absl::Seconds(10)))
        << "group rank " << r;
  }
  EXPECT_EQ(StoredRound(&core), 1);
}

TEST(DynamicRendezvousTest, FailureRestartIsCarriedToEveryNode) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 2, 2, 2);
  absl::Notification changed;
  nodes[1]->SetOnMembershipChange([&] { changed.Notify(); });
  FormRound(nodes);
  std::vector<std::thread> threads;
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
  Nodes nodes = MakeNodes(&core, 2, 2, 2);
  FormRound(nodes);
  EXPECT_TRUE(nodes[1]->ClaimFailure());
  EXPECT_FALSE(nodes[0]->ClaimFailure());
}

// Either order of two failures: the store orders the claims, whichever
// node's worker failed first.
TEST(DynamicRendezvousTest, TheFirstClaimWinsInEitherOrder) {
  for (int first : {0, 1}) {
    StoreCore core;
    Nodes nodes = MakeNodes(&core, 2, 2, 2);
    FormRound(nodes);
    EXPECT_TRUE(nodes[first]->ClaimFailure()) << first;
    EXPECT_FALSE(nodes[1 - first]->ClaimFailure()) << first;
  }
}

// A worker fails on losing its peer before that peer's lease runs out
// (gloo's "connection closed by peer"): its claim wins, there being no
// one else to claim, and the loss is seen within PeerLossWindow after.
TEST(DynamicRendezvousTest, ALeaseExpiryAfterAWonClaimIsSeenWithinTheWindow) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 2, 1, 2);
  FormRound(nodes);
  nodes[1].reset();  // its pod is killed: no claim, no leaving
  const absl::Time failed = absl::Now();
  ASSERT_TRUE(nodes[0]->ClaimFailure());
  EXPECT_FALSE(nodes[0]->MembershipChanged());
  const absl::Time until = failed + nodes[0]->PeerLossWindow();
  while (!nodes[0]->MembershipChanged() && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(nodes[0]->MembershipChanged());
  // The survivor re-forms alone, at MIN.
  std::vector<RendezvousResult> results = FormRound(nodes);
  EXPECT_EQ(results[0].group_world_size, 1);
  EXPECT_EQ(results[0].restart_count, 0);
}

TEST(DynamicRendezvousTest, TheRootCauseIsKeptForWhicheverNodeDecidesNext) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 2, 2, 2);
  EXPECT_EQ(nodes[0]->SwapRootCause("rank 1 KeyError: 'lr'"), "");
  EXPECT_EQ(nodes[1]->SwapRootCause("rank 1 KeyError: 'lr'"),
            "rank 1 KeyError: 'lr'");
  EXPECT_EQ(nodes[0]->SwapRootCause(""), "rank 1 KeyError: 'lr'");
}

// A LocalStore that calls `hook` before every Watch: where a node blocks.
class WatchHookStore : public LocalStore {
 public:
  using Hook = std::function<void(const std::vector<std::string>& prefixes,
                                  int64_t after)>;
  WatchHookStore(StoreCore* core, Hook hook)
      : LocalStore(core), hook_(std::move(hook)) {}
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    hook_(prefixes, after_revision);
    return LocalStore::WatchAny(prefixes, after_revision, timeout);
  }

 private:
  Hook hook_;
};

TEST(DynamicRendezvousTest, TimeBlockedOnPeersIsReported) {
  StoreCore core;
  absl::Notification parked;
  DynamicRendezvous first(
      Options(0, 2, 2),
      std::make_unique<WatchHookStore>(
          &core, [&](const std::vector<std::string>&, int64_t) {
            if (!parked.HasBeenNotified()) parked.Notify();
          }));
  DynamicRendezvous second(Options(1, 2, 2),
                           std::make_unique<LocalStore>(&core));
  absl::StatusOr<RendezvousResult> first_result;
  std::thread t([&] { first_result = first.Next(1); });
  // The second node joins only once the first waits for it.
  ASSERT_TRUE(parked.WaitForNotificationWithTimeout(absl::Seconds(30)));
  auto second_result = second.Next(1);
  t.join();
  ASSERT_TRUE(first_result.ok()) << first_result.status();
  ASSERT_TRUE(second_result.ok()) << second_result.status();
  EXPECT_GT(first_result->peer_wait_seconds, 0);
}

// A LocalStore that notes the timeout of every watch of several prefixes:
// a member's monitor (a joining node watches one).
class MonitorTimeoutStore : public LocalStore {
 public:
  explicit MonitorTimeoutStore(StoreCore* core) : LocalStore(core) {}
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    if (prefixes.size() > 1) {
      absl::MutexLock lock(&mu_);
      if (!first_.has_value()) first_ = timeout;
    }
    return LocalStore::WatchAny(prefixes, after_revision, timeout);
  }
  // The first monitor watch's timeout, once one was made.
  std::optional<absl::Duration> First(absl::Duration within) {
    absl::MutexLock lock(&mu_);
    auto seen = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return first_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&seen), within);
    return first_;
  }

 private:
  absl::Mutex mu_;
  std::optional<absl::Duration> first_ ABSL_GUARDED_BY(mu_);
};

// A member's monitor is answered by what ends the round (the next
// member's lease running out among it), so it does not time out and
// re-arm every keep-alive interval: at a recovery of thousands of nodes
// that was ~2 requests per survivor while the lost lease ran out.
TEST(DynamicRendezvousTest, MonitorWatchLastsALeaseNotAKeepAlive) {
  StoreCore core;
  auto* store = new MonitorTimeoutStore(&core);
  DynamicRendezvous first(Options(0, 2, 2),
                          std::unique_ptr<StoreInterface>(store));
  DynamicRendezvous second(Options(1, 2, 2),
                           std::make_unique<LocalStore>(&core));
  absl::StatusOr<RendezvousResult> first_result;
  std::thread t([&] { first_result = first.Next(1); });
  auto second_result = second.Next(1);
  t.join();
  ASSERT_TRUE(first_result.ok()) << first_result.status();
  ASSERT_TRUE(second_result.ok()) << second_result.status();
  const std::optional<absl::Duration> timeout = store->First(absl::Seconds(30));
  ASSERT_TRUE(timeout.has_value());
  // keep_alive_interval 100 ms, keep_alive_max_attempt 3 (Options).
  EXPECT_EQ(*timeout, absl::Milliseconds(300));
}

// Counts the lease renewals (writes of ctl/alive/) a node makes.
class RenewalCountingStore : public LocalStore {
 public:
  RenewalCountingStore(StoreCore* core, std::atomic<int>* renewals)
      : LocalStore(core), renewals_(renewals) {}
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    for (const auto& kv : kvs) {
      if (absl::StrContains(kv.first, "/ctl/alive/")) ++*renewals_;
    }
    return LocalStore::MultiSet(kvs, ttl);
  }

 private:
  std::atomic<int>* renewals_;
};

// A node whose lease was just renewed does not renew it again to begin a
// round: at a recovery of thousands of nodes that is a request per
// survivor while they all re-join. A node that never renewed does, at once.
TEST(DynamicRendezvousTest, NextDoesNotRenewALeaseRenewedThisInterval) {
  StoreCore core;
  DynamicRendezvousOptions o = Options(0, 1, 1);
  o.heartbeat_thread = false;  // the test renews by hand
  o.config.keep_alive_interval = absl::Hours(1);
  std::atomic<int> renewed{0};
  DynamicRendezvous node(
      o, std::make_unique<RenewalCountingStore>(&core, &renewed));
  ASSERT_TRUE(node.Next(1).ok());
  EXPECT_EQ(renewed.load(), 1);  // never renewed: the first contact
  node.RenewLease();
  ASSERT_EQ(renewed.load(), 2);
  ASSERT_TRUE(node.Next(1).ok());
  EXPECT_EQ(renewed.load(), 2);
  EXPECT_TRUE(core.Check({"rdzv/job/ctl/alive/n0"}).value());
}

// Counts lease writes of its own (MultiSet with a TTL) apart from those
// that go with a join (LeaseThenAddRecord), and what each join carried.
class JoinLeaseStore : public LocalStore {
 public:
  explicit JoinLeaseStore(StoreCore* core) : LocalStore(core) {}
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    if (ttl > absl::ZeroDuration() && !in_join_) ++lease_writes;
    return LocalStore::MultiSet(kvs, ttl);
  }
  absl::StatusOr<AddRecordResult> LeaseThenAddRecord(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record) override {
    ++leased_joins;
    for (const auto& kv : lease) leased_keys.push_back(kv.first);
    lease_ttl = ttl;
    in_join_ = true;
    auto r = LocalStore::LeaseThenAddRecord(lease, ttl, key, delta,
                                            record_prefix, record);
    in_join_ = false;
    return r;
  }
  int lease_writes = 0;
  int leased_joins = 0;
  std::vector<std::string> leased_keys;
  absl::Duration lease_ttl;

 private:
  bool in_join_ = false;
};

// A one-node round's node that renews only as Next does (no heartbeat
// thread, an hour's keep-alive).
DynamicRendezvousOptions SoloOptions() {
  DynamicRendezvousOptions o = Options(0, 1, 1);
  o.heartbeat_thread = false;
  o.config.keep_alive_interval = absl::Hours(1);
  return o;
}

// A new node's first lease goes with its join, in the join's request: at
// a round of thousands of new nodes, a request fewer per node. The lease
// is the node's own (alive key, interval x attempts).
TEST(DynamicRendezvousTest, ANewNodesLeaseGoesWithItsJoin) {
  StoreCore core;
  auto owned = std::make_unique<JoinLeaseStore>(&core);
  JoinLeaseStore* store = owned.get();
  DynamicRendezvous node(SoloOptions(), std::move(owned));
  ASSERT_TRUE(node.Next(1).ok());
  EXPECT_EQ(store->leased_joins, 1);
  EXPECT_EQ(store->lease_writes, 0);
  EXPECT_EQ(store->leased_keys,
            std::vector<std::string>{"rdzv/job/ctl/alive/n0"});
  EXPECT_EQ(store->lease_ttl, absl::Hours(3));
  EXPECT_TRUE(core.Check({"rdzv/job/ctl/alive/n0"}).value());
}

// Logs which requests a node makes: the join with its read
// (AddRecordThenList) as one, and every listing made apart from it.
class CallLogStore : public LocalStore {
 public:
  using LocalStore::LocalStore;
  absl::StatusOr<AddRecordListing> AddRecordThenList(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record,
      const std::string& list_prefix) override {
    calls.push_back(absl::StrCat("AddRecordThenList ", key, " ", list_prefix));
    in_join_ = true;
    auto r = LocalStore::AddRecordThenList(lease, ttl, key, delta,
                                           record_prefix, record, list_prefix);
    in_join_ = false;
    return r;
  }
  absl::StatusOr<StoreListing> ListPage(const std::string& prefix,
                                        const std::string& start_after,
                                        size_t limit) override {
    if (!in_join_) calls.push_back(absl::StrCat("List ", prefix));
    return LocalStore::ListPage(prefix, start_after, limit);
  }
  std::vector<std::string> calls;

 private:
  bool in_join_ = false;
};

// A new node's first request takes its place in round 0 and reads the
// round's state: at a new job of thousands of nodes, one request fewer per
// node (docs/bench). The read is what it decides on: no listing follows
// until the round changes (here: this node closes it).
TEST(DynamicRendezvousTest, ANewNodesFirstReadGoesWithItsJoin) {
  StoreCore core;
  auto owned = std::make_unique<CallLogStore>(&core);
  CallLogStore* store = owned.get();
  DynamicRendezvous node(Options(0, 1, 1), std::move(owned));
  auto r = node.Next(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->round, 0);
  ASSERT_GE(store->calls.size(), 1u);
  EXPECT_EQ(store->calls[0],
            "AddRecordThenList rdzv/job/joined/0 rdzv/job/ctl/state");
  EXPECT_EQ(std::count(store->calls.begin(), store->calls.end(),
                       "List rdzv/job/ctl/state"),
            1);  // after its compare-set closed the round
}

// A new node of a job past round 0 (one that replaces a lost node) took a
// place in round 0 that no one counts, and joins the open round.
TEST(DynamicRendezvousTest, ANewNodeOfALaterRoundJoinsIt) {
  StoreCore core;
  SetOpenRound(&core, 3);
  DynamicRendezvous node(Options(0, 1, 1), std::make_unique<LocalStore>(&core));
  auto r = node.Next(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->round, 3);
  EXPECT_EQ(r->group_world_size, 1);
  EXPECT_EQ(JoinCount(&core, 0), "1");
  EXPECT_EQ(JoinCount(&core, 3), "1");
}

// A new node that arrives while round 0 runs, closed and full: the place
// it takes there changes neither the round's state nor its members, and
// it waits for the next round.
TEST(DynamicRendezvousTest, ALateNodeLeavesAClosedRoundZeroAsItWas) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 2, 2, 2);
  ASSERT_EQ(FormRound(nodes).size(), 2u);
  const StoreListing state_before = *core.List("rdzv/job/ctl/state");
  const StoreListing members_before = *core.List("rdzv/job/members/");
  const StoreListing ranks_before = *core.List("rdzv/job/rank/");
  DynamicRendezvousOptions o = Options(2, 2, 2);
  o.config.join_timeout = absl::Milliseconds(300);
  DynamicRendezvous late(o, std::make_unique<LocalStore>(&core));
  EXPECT_FALSE(late.Next(1).ok());  // the round stays full: join_timeout
  auto entries = [](const StoreListing& l) {
    std::vector<std::pair<std::string, std::string>> kv;
    for (const StoreEntry& e : l.entries) kv.emplace_back(e.key, e.value);
    return kv;
  };
  EXPECT_EQ(entries(*core.List("rdzv/job/ctl/state")), entries(state_before));
  EXPECT_EQ(entries(*core.List("rdzv/job/members/")), entries(members_before));
  EXPECT_EQ(entries(*core.List("rdzv/job/rank/")), entries(ranks_before));
  ASSERT_FALSE(members_before.entries.empty());
  ASSERT_FALSE(ranks_before.entries.empty());
  EXPECT_EQ(JoinCount(&core, 0), "3");  // its place, past the close at 2
  EXPECT_TRUE(core.Check({"rdzv/job/ctl/waiting/n2"}).value());
}

// Answers the first `unavailable` first-round joins as a store not up yet
// (nothing written), then as LocalStore; or takes the place and fails the
// read that goes with it.
class FlakyFirstJoinStore : public LocalStore {
 public:
  FlakyFirstJoinStore(StoreCore* core, int unavailable, bool fail_listing)
      : LocalStore(core),
        unavailable_(unavailable),
        fail_listing_(fail_listing) {}
  absl::StatusOr<AddRecordListing> AddRecordThenList(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record,
      const std::string& list_prefix) override {
    ++calls;
    if (unavailable_ > 0) {
      --unavailable_;
      return absl::UnavailableError("connection refused");
    }
    auto r = LocalStore::AddRecordThenList(lease, ttl, key, delta,
                                           record_prefix, record, list_prefix);
    if (r.ok() && fail_listing_) {
      r->listing = absl::UnavailableError("connection reset");
    }
    return r;
  }
  int calls = 0;

 private:
  int unavailable_;
  bool fail_listing_;
};

// A store not up yet at a node's first request: it waits for the store
// as a first read did, then takes one place.
TEST(DynamicRendezvousTest, AFirstJoinWaitsForTheStore) {
  StoreCore core;
  auto owned = std::make_unique<FlakyFirstJoinStore>(&core, 2, false);
  FlakyFirstJoinStore* store = owned.get();
  DynamicRendezvous node(Options(0, 1, 1), std::move(owned));
  auto r = node.Next(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(store->calls, 3);
  EXPECT_EQ(JoinCount(&core, 0), "1");
}

// A place taken whose read failed is not taken again: the node reads the
// round on its own and goes on from that place.
TEST(DynamicRendezvousTest, AFirstJoinWhoseReadFailedIsNotRepeated) {
  StoreCore core;
  auto owned = std::make_unique<FlakyFirstJoinStore>(&core, 0, true);
  FlakyFirstJoinStore* store = owned.get();
  DynamicRendezvous node(Options(0, 1, 1), std::move(owned));
  auto r = node.Next(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(store->calls, 1);
  EXPECT_EQ(r->group_world_size, 1);
  EXPECT_EQ(JoinCount(&core, 0), "1");
}

// The heartbeat's next renewal counts from the join that carried the
// lease, not from the node's start.
TEST(DynamicRendezvousTest, TheNextRenewalIsAnIntervalAfterTheJoin) {
  StoreCore core;
  DynamicRendezvous node(SoloOptions(), std::make_unique<LocalStore>(&core));
  const absl::Time before = absl::Now();
  ASSERT_TRUE(node.Next(1).ok());
  const absl::Time next = node.NextRenewal(absl::InfinitePast());
  EXPECT_GE(next, before + absl::Hours(1));
  EXPECT_LE(next, absl::Now() + absl::Hours(1));
}

// A lease shorter than three intervals is kept by the heartbeat thread;
// Next renews it once, with the join, not before every step after it.
TEST(DynamicRendezvousTest, AShortLeaseIsRenewedOncePerNext) {
  StoreCore core;
  DynamicRendezvousOptions o = SoloOptions();
  o.config.keep_alive_max_attempt = 1;
  auto owned = std::make_unique<JoinLeaseStore>(&core);
  JoinLeaseStore* store = owned.get();
  DynamicRendezvous node(o, std::move(owned));
  ASSERT_TRUE(node.Next(1).ok());
  EXPECT_EQ(store->leased_joins, 1);
  EXPECT_EQ(store->lease_writes, 0);
}

// Adds and records, but answers that the lease was not written (an old
// store whose lease write after the add failed).
class UnleasedJoinStore : public LocalStore {
 public:
  using LocalStore::LocalStore;
  absl::StatusOr<AddRecordResult> LeaseThenAddRecord(
      const std::vector<std::pair<std::string, std::string>>&, absl::Duration,
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) override {
    auto r = AddThenRecord(key, delta, record_prefix, record);
    if (r.ok()) r->leased = false;
    return r;
  }
};

// A join whose lease was not written counts once, and the lease is still
// written, by the next step that needs it.
TEST(DynamicRendezvousTest, AJoinWithoutItsLeaseIsNotRepeated) {
  StoreCore core;
  DynamicRendezvous node(SoloOptions(),
                         std::make_unique<UnleasedJoinStore>(&core));
  ASSERT_TRUE(node.Next(1).ok());
  LocalStore view(&core);
  EXPECT_EQ(view.Get("rdzv/job/joined/0", absl::ZeroDuration()).value(), "1");
  EXPECT_TRUE(core.Check({"rdzv/job/ctl/alive/n0"}).value());
}

// A node that does not join at once (its round is closed and full) still
// renews a due lease, together with its ask to join: one write for both.
TEST(DynamicRendezvousTest, AWaitingNodesLeaseGoesWithItsAsk) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 1, 1, 1);
  ASSERT_EQ(FormRound(nodes).size(), 1u);
  DynamicRendezvousOptions o = Options(1, 1, 1);
  o.heartbeat_thread = false;
  o.config.keep_alive_interval = absl::Hours(1);
  o.config.keep_alive_max_attempt = 1;  // due once per Next
  o.config.join_timeout = absl::Milliseconds(300);
  auto owned = std::make_unique<JoinLeaseStore>(&core);
  JoinLeaseStore* store = owned.get();
  DynamicRendezvous late(o, std::move(owned));
  // Its first step took a place in round 0, past that round's close, with
  // its lease; then its ask.
  EXPECT_FALSE(late.Next(1).ok());  // the round stays full: join_timeout
  EXPECT_EQ(store->leased_joins, 1);
  EXPECT_EQ(store->lease_writes, 1);
  store->leased_joins = store->lease_writes = 0;
  EXPECT_FALSE(late.Next(1).ok());
  EXPECT_EQ(store->leased_joins, 0);
  EXPECT_EQ(store->lease_writes, 1);
  EXPECT_TRUE(core.Check({"rdzv/job/ctl/waiting/n1"}).value());
}

// A LocalStore that refuses every increment of the counters under
// `refused` with `why`, and counts them.
class RefusingAddStore : public LocalStore {
 public:
  RefusingAddStore(StoreCore* core, std::atomic<int>* adds, std::string refused,
                   absl::Status why)
      : LocalStore(core),
        adds_(adds),
        refused_(std::move(refused)),
        why_(std::move(why)) {}
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    if (!absl::StartsWith(key, refused_)) return LocalStore::Add(key, delta);
    ++*adds_;
    return why_;
  }
  absl::StatusOr<AddRecordResult> AddThenRecord(
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) override {
    if (!absl::StartsWith(key, refused_)) {
      return LocalStore::AddThenRecord(key, delta, record_prefix, record);
    }
    return Add(key, delta).status();
  }

 private:
  std::atomic<int>* adds_;
  const std::string refused_;
  const absl::Status why_;
};

// How many joins a node made in a second of join_timeout against a store
// that refuses each under `refused` as full (the state: round `round`
// open), checking that Next failed within a few seconds.
int JoinsRefusedInASecond(int64_t round, const std::string& refused) {
  StoreCore core;
  if (round > 0) SetOpenRound(&core, round);
  std::atomic<int> adds{0};
  DynamicRendezvousOptions o = Options(0, 1, 1);
  o.config.join_timeout = absl::Seconds(1);
  o.config.keep_alive_interval = absl::Milliseconds(500);
  DynamicRendezvous node(
      o, std::make_unique<RefusingAddStore>(
             &core, &adds, refused,
             absl::ResourceExhaustedError("the store is full")));
  const absl::Time start = absl::Now();
  EXPECT_FALSE(node.Next(1).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  return adds.load();
}

// A node's first request (its place in round 0 with its read) that the
// store keeps refusing is retried after a growing pause, not in a loop
// that burns a core and writes a warning per attempt: 50 ms doubling to a
// 500 ms cap, a handful of attempts in a second.
TEST(DynamicRendezvousTest, FailingFirstJoinIsRetriedWithBackoffNotSpun) {
  const int adds = JoinsRefusedInASecond(0, "rdzv/job/joined/");
  EXPECT_GE(adds, 2);
  EXPECT_LE(adds, 10);
}

// Likewise a join of a later round (kJoin): the node took its place in
// round 0 and then keeps being refused one in the open round 2.
TEST(DynamicRendezvousTest, FailingJoinIsRetriedWithBackoffNotSpun) {
  const int adds = JoinsRefusedInASecond(2, "rdzv/job/joined/2");
  EXPECT_GE(adds, 2);
  EXPECT_LE(adds, 10);
}

// A first request refused as malformed (a run id whose keys are too long
// for the store) ends the rendezvous at once, as its first read's refusal
// did: no retries until join_timeout.
TEST(DynamicRendezvousTest, AFirstJoinRefusedAsMalformedFailsAtOnce) {
  StoreCore core;
  std::atomic<int> adds{0};
  DynamicRendezvousOptions o = Options(0, 1, 1);
  o.config.join_timeout = absl::Seconds(20);
  DynamicRendezvous node(
      o, std::make_unique<RefusingAddStore>(
             &core, &adds, "rdzv/job/joined/",
             absl::InvalidArgumentError("key longer than 4096 bytes")));
  const absl::Time start = absl::Now();
  auto r = node.Next(1);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(adds.load(), 1);
}

// Joining takes a place in the count and writes the node's own record
// there (one request on this store, two on etcd); a node that took its
// place and died before writing its record delays the close by one lease
// at most, and is left out.
TEST(DynamicRendezvousTest, JoinerThatNeverWroteItsRecordIsLeftOut) {
  StoreCore core;
  ASSERT_TRUE(core.Add("rdzv/job/joined/0", 1).ok());  // the ghost: place 1
  Nodes nodes = MakeNodes(&core, 2, 2, 3);
  std::vector<RendezvousResult> results = FormRound(nodes);
  for (const auto& r : results) {
    EXPECT_EQ(r.round, 0);
    EXPECT_EQ(r.group_world_size, 2);
  }
  EXPECT_NE(results[0].group_rank, results[1].group_rank);
  // Place 1 held no member: no node may take its index for its place.
  auto state =
      RdzvState::Decode(core.List("rdzv/job/ctl/state")->entries.at(0).value);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->leader, "");
}

// A join whose answer was lost and that was made again leaves the node's
// record at two places: the round counts it once, and its state names no
// leader, since the places no longer name the members.
TEST(DynamicRendezvousTest, ANodeJoinedTwiceCountsOnce) {
  StoreCore core;
  ASSERT_TRUE(core.Add("rdzv/job/joined/0", 1).ok());
  ASSERT_TRUE(
      core.MultiSet({{"rdzv/job/join/0/1", EncodeJoin({"n1", 1, "127.0.0.1"})}},
                    absl::ZeroDuration())
          .ok());
  Nodes nodes = MakeNodes(&core, 3, 3, 4);
  std::vector<RendezvousResult> results = FormRound(nodes);
  std::set<int> ranks;
  for (const auto& r : results) {
    EXPECT_EQ(r.group_world_size, 3);
    EXPECT_EQ(r.world_size, 3);
    ranks.insert(r.group_rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
  auto state =
      RdzvState::Decode(core.List("rdzv/job/ctl/state")->entries.at(0).value);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->size, 3);
  EXPECT_EQ(state->leader, "");
}

// Logs the writes without a lease (a renewal's has one), the watches and
// the compare-sets of the round's state a node makes, in order.
class CloseLogStore : public LocalStore {
 public:
  using LocalStore::LocalStore;
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    if (ttl == absl::ZeroDuration()) Log("MultiSet");
    return LocalStore::MultiSet(kvs, ttl);
  }
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    Log("Watch");
    return LocalStore::WatchAny(prefixes, after_revision, timeout);
  }
  absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override {
    if (key == "rdzv/job/ctl/state") Log("CompareSet");
    return LocalStore::CompareSet(key, expected, desired);
  }
  std::vector<std::string> Calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Log(const char* call) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(call);
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// The node whose join began the last call writes the round's members and
// rank records while the call runs, where it would only wait: when the
// call ends the close is the join count and the compare-set (a recovery of
// 4,096 nodes closed ~0.2 s after its last call where it now closes at
// once, bench/recover_timeline.py).
TEST(DynamicRendezvousTest, TheLastCallsNodeWritesTheCloseWhileItWaits) {
  StoreCore core;
  auto owned = std::make_unique<CloseLogStore>(&core);
  CloseLogStore* store = owned.get();
  DynamicRendezvous node(Options(0, 1, 2), std::move(owned));
  auto r = node.Next(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->group_world_size, 1);
  const std::vector<std::string> calls = store->Calls();
  auto close = std::find(calls.begin(), calls.end(), "CompareSet");
  ASSERT_NE(close, calls.end());
  auto last_wait = std::find(std::make_reverse_iterator(close), calls.rend(),
                             std::string("Watch"));
  ASSERT_NE(last_wait, calls.rend()) << "no last call before the close";
  EXPECT_EQ(std::find(last_wait.base(), close, "MultiSet"), close)
      << "records written after the last call ended";
  EXPECT_NE(std::find(calls.begin(), last_wait.base(), "MultiSet"),
            last_wait.base())
      << "records not written during the last call";
}

// A node that joins while the last call runs is in the round: the records
// written ahead were for fewer joins, and are written again at the close.
TEST(DynamicRendezvousTest, ANodeJoiningDuringTheLastCallIsInTheClose) {
  StoreCore core;
  DynamicRendezvousOptions o = Options(1, 1, 3);
  o.config.join_timeout = absl::Seconds(5);  // left out: it fails by then
  DynamicRendezvous late(o, std::make_unique<LocalStore>(&core));
  std::thread late_thread;
  absl::StatusOr<RendezvousResult> late_result;
  std::atomic<bool> joined{false};
  DynamicRendezvous first(
      Options(0, 1, 3),
      std::make_unique<WatchHookStore>(
          &core, [&](const std::vector<std::string>&, int64_t) {
            // The first watch is the first node's last call, its records
            // written: the second node joins before it goes on.
            if (joined.exchange(true)) return;
            late_thread = std::thread([&] { late_result = late.Next(1); });
            LocalStore view(&core);
            EXPECT_TRUE(
                view.MultiGet({"rdzv/job/join/0/2"}, absl::Seconds(10)).ok());
          }));
  auto r = first.Next(1);
  ASSERT_TRUE(joined.load());
  late_thread.join();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(late_result.ok()) << late_result.status();
  EXPECT_EQ(r->round, 0);
  EXPECT_EQ(late_result->round, 0);
  EXPECT_EQ(r->group_world_size, 2);
  EXPECT_EQ(late_result->group_world_size, 2);
  EXPECT_NE(r->group_rank, late_result->group_rank);
}

// A node whose worker failed after another node's waits for that node to
// restart or end the job. Had it opened the next round itself, the winner
// would have taken the new round for a membership change and re-formed: a
// permanent failure would have been restarted, and the job would hang.
TEST(DynamicRendezvousTest, ClaimLosersWaitForTheWinnersDecision) {
  StoreCore core;
  std::atomic<std::thread::id> loser_thread{};
  absl::Notification loser_waits;
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  nodes.push_back(std::make_unique<DynamicRendezvous>(
      Options(0, 2, 2),
      std::make_unique<WatchHookStore>(
          &core, [&](const std::vector<std::string>&, int64_t) {
            if (std::this_thread::get_id() == loser_thread.load() &&
                !loser_waits.HasBeenNotified()) {
              loser_waits.Notify();
            }
          })));
  nodes.push_back(std::make_unique<DynamicRendezvous>(
      Options(1, 2, 2), std::make_unique<LocalStore>(&core)));
  FormRound(nodes);
  ASSERT_TRUE(nodes[1]->ClaimFailure());
  ASSERT_FALSE(nodes[0]->ClaimFailure());
  absl::StatusOr<RendezvousResult> next;
  std::thread loser([&] {
    loser_thread = std::this_thread::get_id();
    next = nodes[0]->Next(1);
  });
  ASSERT_TRUE(loser_waits.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(StoredRound(&core), 0);  // it opened no round of its own
  EXPECT_FALSE(nodes[1]->MembershipChanged());
  nodes[1]->SetEndReason("permanent exit_code=1; error: loss is NaN");
  nodes[1]->Shutdown(false);
  loser.join();
  ASSERT_FALSE(next.ok());
  EXPECT_TRUE(absl::IsAborted(next.status())) << next.status();
}

// ... but not for a winner that is gone without deciding.
TEST(DynamicRendezvousTest, ClaimLosersGoOnWhenTheWinnerDies) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 2, 1, 2);
  FormRound(nodes);
  ASSERT_TRUE(nodes[1]->ClaimFailure());
  ASSERT_FALSE(nodes[0]->ClaimFailure());
  nodes[1].reset();  // its heartbeat stops: the lease expires
  auto next = nodes[0]->Next(1);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_GE(next->round, 1);
  EXPECT_EQ(next->group_world_size, 1);
}

// The node that ends the job tells the others why.
TEST(DynamicRendezvousTest, EndReasonReachesTheOtherNodes) {
  StoreCore core;
  Nodes nodes = MakeNodes(&core, 2, 2, 2);
  FormRound(nodes);
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

// A LocalStore whose watches can be held (a slow network) and which can be
// cut off (its host exited).
class ControlledStore : public LocalStore {
 public:
  explicit ControlledStore(StoreCore* core) : LocalStore(core) {}
  // Holds the watches that start from now on; returns once one is held
  // (none is in flight then).
  bool HoldWatches() {
    held_ = true;
    return holding_.WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  void ReleaseWatches() {
    if (!released_.HasBeenNotified()) released_.Notify();
  }
  void Cut() { cut_ = true; }
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    if (cut_) return Gone();
    return LocalStore::MultiSet(kvs, ttl);
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override {
    if (cut_) return Gone();
    return LocalStore::MultiGet(keys, timeout);
  }
  absl::StatusOr<AddRecordResult> AddThenRecord(
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) override {
    if (cut_) return Gone();
    return LocalStore::AddThenRecord(key, delta, record_prefix, record);
  }
  absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override {
    if (cut_) return Gone();
    return LocalStore::CompareSet(key, expected, desired);
  }
  absl::StatusOr<StoreListing> ListPage(const std::string& prefix,
                                        const std::string& start_after,
                                        size_t limit) override {
    if (cut_) return Gone();
    return LocalStore::ListPage(prefix, start_after, limit);
  }
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    if (held_) {
      if (!holding_.HasBeenNotified()) holding_.Notify();
      released_.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
    if (cut_) return Gone();
    return LocalStore::WatchAny(prefixes, after_revision, timeout);
  }

 private:
  static absl::Status Gone() { return absl::UnavailableError("store gone"); }
  std::atomic<bool> held_{false};
  std::atomic<bool> cut_{false};
  absl::Notification holding_, released_;
};

// The store's host that ends the job keeps the store up until the others
// have read why: gone at once, it would leave a peer whose watch was still
// on its way with an unreachable store instead of the reason (and
// read_timeout to wait out before it can tell).
TEST(DynamicRendezvousTest, WaitingForNamesTheRoundAndCancelEndsTheWait) {
  StoreCore core;
  DynamicRendezvous node(Options(0, 2, 2), std::make_unique<LocalStore>(&core));
  EXPECT_EQ(node.WaitingFor(), "");
  absl::StatusOr<RendezvousResult> result;
  std::thread joining([&] { result = node.Next(1); });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::string waiting;
  while (absl::Now() < deadline &&
         (waiting = node.WaitingFor()).find("joined") == std::string::npos) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(waiting, "the rendezvous round 0 (1/2 nodes joined)");
  // Asking only reads: the store's revision does not move.
  const int64_t revision = core.List("")->revision;
  EXPECT_EQ(node.WaitingFor(), waiting);
  EXPECT_EQ(core.List("")->revision, revision);
  node.Cancel();
  joining.join();
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
  EXPECT_EQ(node.WaitingFor(), "");
  node.Shutdown(false);
}

TEST(DynamicRendezvousTest, HostEndingTheJobLetsTheOthersReadWhy) {
  StoreCore core;
  DynamicRendezvousOptions host_options = Options(0, 2, 2);
  host_options.hosting = true;
  std::atomic<std::thread::id> ending_thread{};
  auto controlled = std::make_unique<ControlledStore>(&core);
  ControlledStore* peer_store = controlled.get();
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  // The peer's watch gets through once the host waits in its Shutdown.
  nodes.push_back(std::make_unique<DynamicRendezvous>(
      host_options, std::make_unique<WatchHookStore>(
                        &core, [&](const std::vector<std::string>&, int64_t) {
                          if (std::this_thread::get_id() ==
                              ending_thread.load()) {
                            peer_store->ReleaseWatches();
                          }
                        })));
  nodes.push_back(std::make_unique<DynamicRendezvous>(Options(1, 2, 2),
                                                      std::move(controlled)));
  FormRound(nodes);
  ASSERT_TRUE(peer_store->HoldWatches());  // its monitor's next watch
  std::thread ending([&] {
    ending_thread = std::this_thread::get_id();
    nodes[0]->SetEndReason("permanent exit_code=1; error: loss is NaN");
    nodes[0]->Shutdown(false);
  });
  ending.join();
  peer_store->Cut();  // the host pod is gone, and its store with it
  peer_store->ReleaseWatches();
  auto next = nodes[1]->Next(1);
  ASSERT_FALSE(next.ok());
  EXPECT_TRUE(absl::IsAborted(next.status())) << next.status();
  EXPECT_NE(next.status().message().find("loss is NaN"), std::string::npos)
      << next.status();
}

// A member that finished (done/, then gone after its exit barrier) has
// left the ring: the member before it looks past it, to the next one.
TEST(DynamicRendezvousTest, FinishedMemberIsLookedPastNotTakenForLost) {
  StoreCore core;
  ASSERT_TRUE(
      core.MultiSet({{"rdzv/job/host", "n0"}}, absl::ZeroDuration()).ok());
  absl::Mutex mu;
  int64_t judged_past = -1;  // n0's monitor watches from here
  bool changed = false;
  std::vector<std::unique_ptr<DynamicRendezvous>> nodes;
  for (int i = 0; i < 3; ++i) {
    auto o = Options(i, 3, 3);
    o.config.exit_barrier_timeout = absl::Milliseconds(200);
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        o, std::make_unique<WatchHookStore>(
               &core,
               [&, i](const std::vector<std::string>& prefixes, int64_t after) {
                 // The monitor's watch: the state and the next lease.
                 if (i == 0 && prefixes.size() > 1) {
                   absl::MutexLock lock(&mu);
                   judged_past = after;
                 }
               })));
  }
  std::vector<RendezvousResult> results = FormRound(nodes);
  ASSERT_EQ(results[0].group_rank, 0);
  const int rank1 = results[1].group_rank == 1 ? 1 : 2;
  const int rank2 = 3 - rank1;
  nodes[0]->SetOnMembershipChange([&] {
    absl::MutexLock lock(&mu);
    changed = true;
  });
  // Rank 1 finishes; its exit barrier times out (the others still run) and
  // its lease lapses.
  nodes[rank1]->Shutdown(/*succeeded=*/true);
  const std::string lease = "rdzv/job/ctl/alive/n" + std::to_string(rank1);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  LocalStore observer(&core);
  for (;;) {  // until the lease is gone: each wait ends on its next change
    const int64_t listed = core.List(lease)->revision;
    if (!*core.Check({lease}) || absl::Now() >= deadline) break;
    ASSERT_TRUE(observer.Watch(lease, listed, deadline - absl::Now()).ok());
  }
  ASSERT_FALSE(*core.Check({lease}));
  // Once n0's monitor has judged the lapse, it has not fired.
  const int64_t lapsed_at = core.List("rdzv/job/ctl/")->revision;
  {
    absl::MutexLock lock(&mu);
    auto judged = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return judged_past >= lapsed_at;
    };
    ASSERT_TRUE(mu.AwaitWithDeadline(absl::Condition(&judged), deadline));
    EXPECT_FALSE(changed);
  }
  // Rank 2, past the finished rank 1, crashes: n0 sees that.
  nodes[rank2].reset();
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithDeadline(absl::Condition(&changed), deadline));
  }
  EXPECT_EQ(StoredRound(&core), 1);
}

// Counts the listings of the round's state a node makes.
class StateListingCountingStore : public LocalStore {
 public:
  StateListingCountingStore(StoreCore* core, std::atomic<int>* listings)
      : LocalStore(core), listings_(listings) {}
  absl::StatusOr<StoreListing> ListPage(const std::string& prefix,
                                        const std::string& start_after,
                                        size_t limit) override {
    if (prefix == "rdzv/job/ctl/state") ++*listings_;
    return LocalStore::ListPage(prefix, start_after, limit);
  }

 private:
  std::atomic<int>* listings_;
};

// A node waiting for the round to fill is woken by the compare-set that
// closes it; the watch's answer carries that state, so the node reads it
// once (its first look), not again after the wake: at thousands of
// nodes, that listing was one request per node at the close.
TEST(DynamicRendezvousTest, TheStateAWatchToldIsNotListedAgain) {
  StoreCore core;
  std::atomic<int> listings{0};
  DynamicRendezvous waiter(
      Options(0, 2, 2),
      std::make_unique<StateListingCountingStore>(&core, &listings));
  DynamicRendezvous closer(Options(1, 2, 2),
                           std::make_unique<LocalStore>(&core));
  absl::StatusOr<RendezvousResult> waited;
  std::thread t([&] { waited = waiter.Next(1); });
  // Its watch is parked: the close is a change it is told of.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (core.Stats().parked_waits == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(core.Stats().parked_waits, 1);
  auto closed = closer.Next(1);
  t.join();
  ASSERT_TRUE(closed.ok()) << closed.status();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->group_world_size, 2);
  EXPECT_EQ(listings.load(), 1);
}

// A node's reads, and its watches answered by a change: once its round
// is formed, its monitor's.
struct MonitorCounts {
  std::atomic<int> reads{0};
  std::atomic<int> wakes{0};
};
class ReadCountingStore : public LocalStore {
 public:
  ReadCountingStore(StoreCore* core, MonitorCounts* counts)
      : LocalStore(core), counts_(counts), reads_(&counts->reads) {}
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    auto w = LocalStore::WatchAny(prefixes, after_revision, timeout);
    if (w.ok() && w->changed) ++counts_->wakes;
    return w;
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override {
    ++*reads_;
    return LocalStore::MultiGet(keys, timeout);
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    ++*reads_;
    return LocalStore::Check(keys);
  }
  absl::StatusOr<StoreListing> ListPage(const std::string& prefix,
                                        const std::string& start_after,
                                        size_t limit) override {
    ++*reads_;
    return LocalStore::ListPage(prefix, start_after, limit);
  }

 private:
  MonitorCounts* counts_;
  std::atomic<int>* reads_;
};

// At thousands of members, one lost lease woke every member's monitor,
// each to read the state and its own next member's lease. Only the member
// before the lost one in rank order may wake; the others hear of the loss
// from the round it opens, which tells them what changed without a read.
// Leases run on a fake store clock that the test advances.
TEST(DynamicRendezvousTest, OnlyTheMemberBeforeALostOneIsWokenByItsLease) {
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  MonitorCounts counts[4];
  absl::Notification changed[4];
  Nodes nodes;
  for (int i = 0; i < 4; ++i) {
    DynamicRendezvousOptions o = Options(i, 4, 4);
    o.heartbeat_thread = false;  // renewed by hand, on the fake clock
    o.config.keep_alive_interval = absl::Hours(1);  // a lease of 3 h
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        o, std::make_unique<ReadCountingStore>(&core, &counts[i])));
    nodes[i]->SetOnMembershipChange([&, i] { changed[i].Notify(); });
  }
  std::vector<RendezvousResult> results = FormRound(nodes);
  std::vector<int> by_rank(4);
  for (int i = 0; i < 4; ++i) by_rank[results[i].group_rank] = i;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  // Until `n` watches are parked: the monitors wait in the store.
  auto parked = [&](int64_t n) {
    while (core.Stats().parked_waits != n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    return core.Stats().parked_waits == n;
  };
  ASSERT_TRUE(parked(4));
  const std::string watcher_lease =
      "rdzv/job/ctl/alive/n" + std::to_string(by_rank[1]);
  const std::string lost_lease =
      "rdzv/job/ctl/alive/n" + std::to_string(by_rank[2]);
  // Group rank 2 is lost; rank 1, which alone watches its lease, is gone
  // too but its lease is kept: nobody must wake for rank 2's lease.
  for (int r : {1, 2}) {
    nodes[by_rank[r]]->Cancel();  // ends its monitor's watch
    nodes[by_rank[r]].reset();
  }
  ASSERT_TRUE(parked(2));
  for (auto& c : counts) c.reads = c.wakes = 0;
  auto step = [&](bool keep_watcher) {
    for (int r : {0, 3}) nodes[by_rank[r]]->RenewLease();
    if (keep_watcher) {
      ASSERT_TRUE(core.MultiSet({{watcher_lease, "1"}}, absl::Hours(3)).ok());
    }
    clock.Advance(absl::Hours(1));
    // The store's timer has expired what is due once it read the clock
    // twice.
    ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(10)));
    ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(10)));
  };
  for (int i = 0; i < 3; ++i) {
    step(/*keep_watcher=*/true);
    // Both monitors still wait in the store: a watch lasts a lease (3 h
    // here) and is parked again when it times out.
    ASSERT_TRUE(parked(2));
  }
  ASSERT_FALSE(*core.Check({lost_lease}));
  for (int r : {0, 3}) {
    EXPECT_EQ(counts[by_rank[r]].wakes.load(), 0) << "group rank " << r;
    EXPECT_EQ(counts[by_rank[r]].reads.load(), 0) << "group rank " << r;
  }
  EXPECT_FALSE(changed[by_rank[0]].HasBeenNotified());
  EXPECT_FALSE(changed[by_rank[3]].HasBeenNotified());
  // Rank 1's lease runs out: rank 0, the member before it, sees that and
  // opens the next round, which rank 3 hears of.
  for (int i = 0; i < 4 && *core.Check({watcher_lease}); ++i) {
    step(/*keep_watcher=*/false);
  }
  ASSERT_FALSE(*core.Check({watcher_lease}));
  EXPECT_TRUE(
      changed[by_rank[0]].WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(
      changed[by_rank[3]].WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(StoredRound(&core), 1);
}

// Members' monitors watch from the revision their round closed at. A node
// that asked to join during round 0 and missed the whole of round 1 (its
// watch was slow) asks again once it sees round 1 closed without it: the
// key it wrote during round 0 is older than round 1's close, and without a
// new write it waited until join_timeout.
TEST(DynamicRendezvousTest, NodeThatMissedARoundAsksAgainToJoinTheNext) {
  StoreCore core;
  Nodes members = MakeNodes(&core, 2, 2, 3);
  std::atomic<int> changes[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    members[i]->SetOnMembershipChange([&, i] { ++changes[i]; });
  }
  FormRound(members);
  auto slow = std::make_unique<ControlledStore>(&core);
  ControlledStore* slow_store = slow.get();
  DynamicRendezvous late(Options(2, 2, 3), std::move(slow));
  absl::StatusOr<RendezvousResult> joined;
  std::thread joining([&] { joined = late.Next(1); });
  // It asked to join round 0's successor, and its watch is held.
  ASSERT_TRUE(slow_store->HoldWatches());
  ASSERT_TRUE(WaitFor([&] { return changes[0] > 0 && changes[1] > 0; }));
  std::vector<RendezvousResult> round1 = FormRound(members);
  ASSERT_EQ(round1[0].round, 1);
  ASSERT_EQ(round1[0].group_world_size, 2);
  slow_store->ReleaseWatches();
  const bool asked = WaitFor([&] { return changes[0] > 1; });
  if (!asked) late.Cancel();  // else it waits out join_timeout
  EXPECT_TRUE(asked) << "the members never heard of the waiting node";
  if (asked) {
    std::vector<RendezvousResult> round2 = FormRound(members);
    EXPECT_EQ(round2[0].round, 2);
    EXPECT_EQ(round2[0].group_world_size, 3);
  }
  joining.join();
  if (asked) {
    ASSERT_TRUE(joined.ok()) << joined.status();
    EXPECT_EQ(joined->round, 2);
  }
}

// A LocalStore that holds the first write of a node's ask to join made
// after Arm() until Release().
class HeldAskStore : public LocalStore {
 public:
  HeldAskStore(StoreCore* core, std::string ask)
      : LocalStore(core), ask_(std::move(ask)) {}
  void Arm() { armed_ = true; }
  bool AwaitHeld() {
    return held_.WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  void Release() { release_.Notify(); }
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    const bool asks =
        std::any_of(kvs.begin(), kvs.end(),
                    [this](const auto& kv) { return kv.first == ask_; });
    if (asks && armed_.exchange(false)) {
      held_.Notify();
      release_.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
    return LocalStore::MultiSet(kvs, ttl);
  }

 private:
  const std::string ask_;
  std::atomic<bool> armed_{false};
  absl::Notification held_, release_;
};

// A lease renewal that carried the node's ask to join while the node
// joined (and withdrew the ask) must not leave the ask behind: it would
// live as long as the lease, and the members would keep seeing it.
TEST(DynamicRendezvousTest, ARenewalRacingTheJoinLeavesNoAskBehind) {
  StoreCore core;
  Nodes members = MakeNodes(&core, 2, 2, 3);
  std::atomic<int> changes{0};
  members[0]->SetOnMembershipChange([&] { ++changes; });
  FormRound(members);
  const std::string ask = RdzvKeys("job").Waiting("n2");
  auto held = std::make_unique<HeldAskStore>(&core, ask);
  HeldAskStore* store = held.get();
  DynamicRendezvousOptions o = Options(2, 2, 3);
  o.heartbeat_thread = false;
  DynamicRendezvous late(o, std::move(held));
  auto asked = [&] {
    auto listing = core.List(ask);
    return listing.ok() && !listing->entries.empty();
  };
  absl::StatusOr<RendezvousResult> joined;
  std::thread joining([&] { joined = late.Next(1); });
  ASSERT_TRUE(WaitFor(asked));
  store->Arm();
  std::thread renewal([&] { late.RenewLease(); });
  ASSERT_TRUE(store->AwaitHeld());
  // The members re-form with the late node, which withdraws its ask.
  ASSERT_TRUE(WaitFor([&] { return changes > 0; }));
  FormRound(members);
  joining.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->group_world_size, 3);
  EXPECT_FALSE(asked());
  store->Release();  // the renewal writes the ask again...
  renewal.join();
  EXPECT_FALSE(asked()) << "the renewal left the withdrawn ask behind";
}

// A LocalStore whose reads wait until opened: a closer still reading the
// join records.
class GatedReadStore : public LocalStore {
 public:
  explicit GatedReadStore(StoreCore* core) : LocalStore(core) {}
  void Open() { open_.Notify(); }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override {
    open_.WaitForNotificationWithTimeout(absl::Seconds(10));
    return LocalStore::MultiGet(keys, timeout);
  }

 private:
  absl::Notification open_;
};

// A node that joined a full round asks for the next one while the round is
// still open; the round then closes below max_nodes (a joiner never wrote
// its record). The members watch from the close on, after the node's ask:
// it asks again once it sees the round closed.
TEST(DynamicRendezvousTest, NodeLeftOverByAFullRoundAsksAgainOnceItCloses) {
  StoreCore core;
  ASSERT_TRUE(core.Add("rdzv/job/joined/0", 1).ok());  // the ghost: place 1
  auto gated = std::make_unique<GatedReadStore>(&core);
  GatedReadStore* closer_store = gated.get();
  DynamicRendezvous member(Options(0, 1, 2), std::move(gated));
  DynamicRendezvous late(Options(1, 1, 2), std::make_unique<LocalStore>(&core));
  std::atomic<int> changes{0};
  member.SetOnMembershipChange([&] { ++changes; });
  auto joined_count = [&] {
    auto l = core.List("rdzv/job/joined/0");
    int64_t n = 0;
    if (l.ok() && !l->entries.empty()) {
      (void)absl::SimpleAtoi(l->entries[0].value, &n);
    }
    return n;
  };
  absl::StatusOr<RendezvousResult> formed, joined;
  std::thread forming([&] { formed = member.Next(1); });
  ASSERT_TRUE(WaitFor([&] { return joined_count() == 2; }));
  std::thread joining([&] { joined = late.Next(1); });
  // Place 3 of 2: it asks for the next round before this one closes.
  ASSERT_TRUE(WaitFor([&] { return joined_count() == 3; }));
  closer_store->Open();
  forming.join();
  ASSERT_TRUE(formed.ok()) << formed.status();
  ASSERT_EQ(formed->group_world_size, 1);
  const bool asked = WaitFor([&] { return changes > 0; });
  if (!asked) late.Cancel();  // else it waits out join_timeout
  EXPECT_TRUE(asked) << "the member never heard of the waiting node";
  if (asked) {
    formed = member.Next(1);
    ASSERT_TRUE(formed.ok()) << formed.status();
    EXPECT_EQ(formed->group_world_size, 2);
  }
  joining.join();
  if (asked) {
    ASSERT_TRUE(joined.ok()) << joined.status();
    EXPECT_EQ(joined->round, 1);
  }
}

// A LocalStore that can hold the answers of the watches in flight (a slow
// network): they return only once released.
class AnswerHoldingStore : public LocalStore {
 public:
  explicit AnswerHoldingStore(StoreCore* core) : LocalStore(core) {}
  void HoldAnswersInFlight() { hold_before_ = ++epoch_; }
  void Release() { released_.Notify(); }
  absl::StatusOr<WatchResult> WatchAny(const std::vector<std::string>& prefixes,
                                       int64_t after_revision,
                                       absl::Duration timeout) override {
    const int started = epoch_;
    auto w = LocalStore::WatchAny(prefixes, after_revision, timeout);
    if (started < hold_before_) {
      ++held_;
      released_.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
    return w;
  }
  std::atomic<int> held_{0};

 private:
  std::atomic<int> epoch_{0};
  std::atomic<int> hold_before_{0};
  absl::Notification released_;
};

// The monitor's watch of round 0 saw round 1 open but was answered only
// after round 1 formed: judged against round 1 (open then, closed now), it
// was taken for a change and restarted the workers for nothing.
TEST(DynamicRendezvousTest, AWatchOfTheLastRoundIsNotJudgedAgainstTheNext) {
  StoreCore core;
  Nodes nodes;
  std::vector<AnswerHoldingStore*> stores;
  std::atomic<int> changes{0};
  for (int i = 0; i < 2; ++i) {
    DynamicRendezvousOptions o = Options(i, 2, 2);
    // A watch lasting 3 h: the monitor's stays in flight throughout.
    o.config.keep_alive_interval = absl::Hours(1);
    auto store = std::make_unique<AnswerHoldingStore>(&core);
    stores.push_back(store.get());
    nodes.push_back(std::make_unique<DynamicRendezvous>(o, std::move(store)));
  }
  nodes[0]->SetOnMembershipChange([&] { ++changes; });
  FormRound(nodes);
  ASSERT_TRUE(WaitFor([&] { return core.Stats().parked_waits == 2; }));
  stores[0]->HoldAnswersInFlight();
  // Node 1's worker failed: it opens round 1, which answers node 0's
  // watch; the answer is held until round 1 formed.
  nodes[1]->NoteFailureRestart(1);
  std::vector<RendezvousResult> results = FormRound(nodes);
  ASSERT_EQ(results[0].round, 1);
  ASSERT_TRUE(WaitFor([&] { return stores[0]->held_ == 1; }));
  stores[0]->Release();
  // Both monitors watch round 1 again, and nobody heard of a change.
  EXPECT_TRUE(WaitFor([&] { return core.Stats().parked_waits == 2; }));
  EXPECT_EQ(changes.load(), 0);
}

}  // namespace
}  // namespace distjob
