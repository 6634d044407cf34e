#include "rendezvous/store/store_core.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "rendezvous/store/fake_store_clock.h"

namespace distjob {
namespace {

// One get or watch parked through StoreCore's callback API. Declare these
// before the StoreCore: its destructor answers what is still parked.
class Parked {
 public:
  StoreCore::GetCallback GetDone() {
    return [this](absl::StatusOr<std::vector<std::string>> r) {
      get_ = std::move(r);
      done_.Notify();
    };
  }
  StoreCore::WatchCallback WatchDone() {
    return [this](absl::StatusOr<std::pair<bool, int64_t>> r) {
      watch_ = std::move(r);
      done_.Notify();
    };
  }
  StoreCore::WatchAnyCallback WatchAnyDone() {
    return [this](absl::StatusOr<WatchResult> r) {
      watch_any_ = std::move(r);
      done_.Notify();
    };
  }
  // Writes and deletes answer on the caller's thread before they return,
  // so after one of them this needs no wait.
  bool answered() const { return done_.HasBeenNotified(); }
  bool Await() {
    return done_.WaitForNotificationWithTimeout(absl::Seconds(30));
  }
  const absl::StatusOr<std::vector<std::string>>& get() const { return get_; }
  const absl::StatusOr<std::pair<bool, int64_t>>& watch() const {
    return watch_;
  }
  const absl::StatusOr<WatchResult>& watch_any() const { return watch_any_; }

 private:
  absl::Notification done_;
  absl::StatusOr<std::vector<std::string>> get_;
  absl::StatusOr<std::pair<bool, int64_t>> watch_;
  absl::StatusOr<WatchResult> watch_any_;
};

int64_t Set(StoreCore& core, const std::string& key, const std::string& value,
            absl::Duration ttl = absl::ZeroDuration()) {
  auto rev = core.MultiSet({{key, value}}, ttl);
  EXPECT_TRUE(rev.ok()) << rev.status();
  return rev.ok() ? *rev : -1;
}

TEST(StoreCoreTest, SetGetAddAppendDeleteNumKeys) {
  StoreCore core;
  LocalStore store(&core);
  ASSERT_TRUE(store.Set("a", "1").ok());
  EXPECT_EQ(*store.Get("a", absl::ZeroDuration()), "1");
  EXPECT_EQ(*store.Add("a", 4), 5);
  EXPECT_EQ(*store.Add("n", 2), 2);
  EXPECT_EQ(*store.Append("s", "ab"), 2);
  EXPECT_EQ(*store.Append("s", "c"), 3);
  EXPECT_EQ(*store.Get("s", absl::ZeroDuration()), "abc");
  EXPECT_EQ(*store.NumKeys(), 3);
  EXPECT_TRUE(*store.Check({"a", "n"}));
  EXPECT_FALSE(*store.Check({"a", "zz"}));
  EXPECT_EQ(*store.Delete({"a", "zz"}), 1);
  EXPECT_EQ(store.Get("a", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  auto values = store.MultiGet({"n", "s"}, absl::ZeroDuration());
  ASSERT_TRUE(values.ok());
  EXPECT_EQ((*values)[1], "abc");
}

TEST(StoreCoreTest, AddThatOverflowsIsOutOfRangeAndKeepsTheValue) {
  StoreCore core;
  LocalStore store(&core);
  ASSERT_EQ(*store.Add("n", std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(store.Add("n", 1).status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(store.Set("m", "-5").ok());
  EXPECT_EQ(store.Add("m", std::numeric_limits<int64_t>::min()).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*store.Get("n", absl::ZeroDuration()),
            std::to_string(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(*store.Get("m", absl::ZeroDuration()), "-5");
}

// A joiner's place and record in one call: the record lands under the
// count; a record the limits refuse leaves the counter as it was.
TEST(StoreCoreTest, AddThenRecordWritesTheRecordUnderTheCountOrNothing) {
  StoreLimits limits;
  limits.max_value_bytes = 64;
  StoreCore core(limits);
  LocalStore store(&core);
  auto first = store.AddThenRecord("n", 1, "rec/", "alpha");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->count, 1);
  EXPECT_TRUE(first->recorded);
  auto second = store.AddThenRecord("n", 2, "rec/", "beta");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->count, 3);
  EXPECT_EQ(*store.Get("rec/1", absl::ZeroDuration()), "alpha");
  EXPECT_EQ(*store.Get("rec/3", absl::ZeroDuration()), "beta");
  EXPECT_EQ(
      store.AddThenRecord("n", 1, "rec/", std::string(65, 'x')).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store.AddThenRecord("n", 1, std::string(5000, 'k'), "v").status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store.Add("n", 0), 3);
  EXPECT_FALSE(*store.Check({"rec/4"}));
  EXPECT_EQ(core.NumKeys(), 3);
}

// Out of room for both (where each would fit alone), it writes neither;
// a record that would replace the counter is refused.
TEST(StoreCoreTest, AddThenRecordOutOfRoomWritesNeither) {
  constexpr size_t kOverhead = StoreCore::kKeyOverhead;
  StoreLimits limits;
  // After "n" = "1" (2 bytes) and "rec/1" (5 + 20), a counter "m" (2) or
  // its record "rec/m1" (6 + 4) fits, but not both.
  limits.max_total_bytes = 3 * kOverhead + 27 + 10;
  StoreCore core(limits);
  LocalStore store(&core);
  ASSERT_TRUE(store.AddThenRecord("n", 1, "rec/", std::string(20, 'x')).ok());
  EXPECT_EQ(
      store.AddThenRecord("m", 1, "rec/m", std::string(4, 'y')).status().code(),
      absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(*store.Check({"m"}));
  EXPECT_TRUE(store.Add("m", 1).ok());  // the counter alone fits
  EXPECT_EQ(store.AddThenRecord("n1", 1, "n", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(*store.Check({"n1"}));
  EXPECT_EQ(core.NumKeys(), 3);
}

TEST(StoreCoreTest, CompareSetReturnsCurrentValueLikeTcpStore) {
  StoreCore core;
  LocalStore store(&core);
  auto r = store.CompareSet("k", "", "v1");
  EXPECT_TRUE(r->swapped);
  EXPECT_EQ(r->value, "v1");
  r = store.CompareSet("k", "wrong", "v2");
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "v1");
  r = store.CompareSet("missing", "x", "y");
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "x");
}

TEST(StoreCoreTest, GetBlocksUntilSetAndTimesOut) {
  Parked never;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  LocalStore store(&core);
  std::thread setter([&] {
    // The getter parks first or not: either way it must see the value.
    ASSERT_TRUE(store.Set("late", "x").ok());
  });
  EXPECT_EQ(*store.Get("late", absl::Seconds(10)), "x");
  setter.join();
  core.MultiGet({"never"}, absl::Milliseconds(50), never.GetDone());
  clock.Advance(absl::Milliseconds(49));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(30)));
  EXPECT_FALSE(never.answered());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(never.Await());
  EXPECT_EQ(never.get().status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(StoreCoreTest, LeaseExpiresOnServerClockAndWakesWatchers) {
  Parked w;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  LocalStore store(&core);
  auto rev = store.Set("p/alive", "1", absl::Milliseconds(100));
  ASSERT_TRUE(rev.ok());
  core.Watch("p/", *rev, absl::Seconds(10), w.WatchDone());
  clock.Advance(absl::Milliseconds(99));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(30)));
  EXPECT_TRUE(*store.Check({"p/alive"}));
  EXPECT_FALSE(w.answered());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(w.Await());
  ASSERT_TRUE(w.watch().ok());
  EXPECT_TRUE(w.watch()->first);
  EXPECT_FALSE(*store.Check({"p/alive"}));
}

TEST(StoreCoreTest, StatsCountKeysBytesParkedWaitsAndLeaseExpiries) {
  Parked w;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  LocalStore store(&core);
  ASSERT_TRUE(store.Set("k", "vv").ok());
  ASSERT_TRUE(store.Set("lease", "1", absl::Milliseconds(100)).ok());
  core.MultiGet({"missing"}, absl::Seconds(10), w.GetDone());
  StoreStats stats = core.Stats();
  EXPECT_EQ(stats.keys, 2);
  // Keys and values with their nodes, and the parked wait with its key.
  EXPECT_EQ(stats.bytes, 1 + 2 + 5 + 1 + 2 * StoreCore::kKeyOverhead +
                             StoreCore::WaiterBytes({"missing"}, "", 0));
  EXPECT_EQ(stats.parked_waits, 1);
  EXPECT_EQ(stats.lease_expiries, 0);
  clock.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(30)));
  ASSERT_TRUE(store.Set("missing", "x").ok());
  ASSERT_TRUE(w.Await());
  stats = core.Stats();
  EXPECT_EQ(stats.keys, 2);
  EXPECT_EQ(stats.parked_waits, 0);
  EXPECT_EQ(stats.lease_expiries, 1);
}

TEST(StoreCoreTest, AgesAndLeasesAreReadOnTheInjectedClock) {
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  Set(core, "k", "v", absl::Seconds(10));
  clock.Advance(absl::Milliseconds(1500));
  const StoreListing listing = *core.List("k");
  ASSERT_EQ(listing.entries.size(), 1u);
  EXPECT_EQ(listing.entries[0].age, absl::Milliseconds(1500));
  EXPECT_EQ(listing.entries[0].ttl_left, absl::Milliseconds(8500));
}

TEST(StoreCoreTest, WatchIgnoresOtherPrefixesAndTimesOut) {
  Parked w;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  const int64_t rev = Set(core, "other", "1");
  core.Watch("p/", rev, absl::Milliseconds(50), w.WatchDone());
  Set(core, "other", "2");
  clock.Advance(absl::Milliseconds(50));
  ASSERT_TRUE(w.Await());
  ASSERT_TRUE(w.watch().ok());
  EXPECT_FALSE(w.watch()->first);
}

TEST(StoreCoreTest, OverLimitRequestsAreRejected) {
  StoreLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  // Room for three keys of 2 + 16 bytes with their overhead.
  limits.max_total_bytes = 3 * (2 + 16 + StoreCore::kKeyOverhead) + 10;
  StoreCore core(limits);
  LocalStore store(&core);
  EXPECT_EQ(store.Set("a-very-long-key", "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set("k", std::string(17, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store.Set("k" + std::to_string(i), std::string(16, 'x')).ok());
  }
  EXPECT_EQ(store.Set("k9", std::string(16, 'x')).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A 0-byte value still costs its key's node: counting payload only let a
// flood of tiny keys grow the host without bound.
TEST(StoreCoreTest, TheMemoryLimitCountsEachKeysOverhead) {
  StoreLimits limits;
  limits.max_total_bytes = 100 * StoreCore::kKeyOverhead;
  StoreCore core(limits);
  int stored = 0;
  absl::Status refused;
  for (int i = 0; i < 1000 && refused.ok(); ++i) {
    auto r = core.MultiSet({{absl::StrCat("k", i), ""}}, absl::ZeroDuration());
    if (r.ok()) ++stored;
    refused = r.status();
  }
  EXPECT_LT(stored, 100);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_total_bytes"), std::string::npos)
      << refused;
  EXPECT_LE(static_cast<size_t>(core.Stats().bytes), limits.max_total_bytes);
}

TEST(StoreCoreTest, ParkedWaitsCountAgainstTheirMemoryLimit) {
  std::deque<Parked> parked(11);
  StoreLimits limits;
  limits.call_bytes = 1000;
  limits.max_waiter_bytes = 10 * StoreCore::WaiterBytes({"k"}, "", 1000);
  StoreCore core(limits);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NE(core.MultiGet({"k"}, absl::Seconds(30), parked[i].GetDone()), 0u);
  }
  EXPECT_EQ(core.Watch("k", 0, absl::Seconds(30), parked[10].WatchDone()), 0u);
  ASSERT_TRUE(parked[10].answered());
  EXPECT_EQ(parked[10].watch().status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_NE(parked[10].watch().status().message().find("max_waiter_bytes"),
            std::string::npos);
  Set(core, "k", "v");  // answers the ten, which frees their room
  EXPECT_EQ(core.Stats().parked_waits, 0);
}

TEST(StoreCoreTest, CancelAnswersAndFreesAParkedGetAndWatch) {
  Parked get;
  Parked watch;
  StoreCore core;
  const int64_t empty = core.Stats().bytes;
  const uint64_t g = core.MultiGet({"k"}, absl::Seconds(30), get.GetDone());
  const uint64_t w = core.Watch("p/", 0, absl::Seconds(30), watch.WatchDone());
  ASSERT_NE(g, 0u);
  ASSERT_NE(w, 0u);
  EXPECT_EQ(core.Stats().parked_waits, 2);
  core.Cancel(g);
  core.Cancel(w);
  ASSERT_TRUE(get.answered());
  ASSERT_TRUE(watch.answered());
  EXPECT_EQ(get.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(watch.watch().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(core.Stats().parked_waits, 0);
  EXPECT_EQ(core.Stats().bytes, empty);
  // An answered ticket is ignored; a write finds no stale index entry.
  core.Cancel(g);
  Set(core, "k", "v");
  Set(core, "p/x", "v");
  EXPECT_EQ(core.Stats().parked_waits, 0);
}

// Callers that went away used to hold their slots until their deadline,
// and every later blocking call failed with "too many blocked waits".
TEST(StoreCoreTest, CancelledWaitsGiveTheirSlotsToNewOnes) {
  std::atomic<int> cancelled{0};
  Parked refused;
  Parked later;
  StoreLimits limits;
  limits.max_waiters = 50;
  StoreCore core(limits);
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 50; ++i) {
    tickets.push_back(
        core.Watch(absl::StrCat("w", i), 0, absl::Hours(1), [&](auto r) {
          if (absl::IsCancelled(r.status())) {
            ++cancelled;
          }
        }));
  }
  core.MultiGet({"k"}, absl::Seconds(30), refused.GetDone());
  ASSERT_TRUE(refused.answered());
  EXPECT_EQ(refused.get().status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.get().status().message().find("max_waiters"),
            std::string::npos);
  for (uint64_t t : tickets) core.Cancel(t);
  EXPECT_EQ(cancelled.load(), 50);
  EXPECT_EQ(core.Stats().parked_waits, 0);
  EXPECT_NE(core.MultiGet({"k"}, absl::Seconds(30), later.GetDone()), 0u);
  Set(core, "k", "v");
  ASSERT_TRUE(later.answered());
  EXPECT_TRUE(later.get().ok());
}

TEST(StoreCoreTest, EveryRequestIsCheckedForKeySizeAndCount) {
  StoreLimits limits;
  limits.max_key_bytes = 8;
  limits.max_keys_per_request = 3;
  StoreCore core(limits);
  LocalStore store(&core);
  const std::string long_key(9, 'k');
  auto named = [](const absl::Status& s, const std::string& limit) {
    return s.code() == absl::StatusCode::kInvalidArgument &&
           s.message().find(limit) != std::string::npos;
  };
  EXPECT_TRUE(
      named(store.Get(long_key, absl::Seconds(1)).status(), "max_key_bytes"));
  EXPECT_TRUE(named(store.Check({long_key}).status(), "max_key_bytes"));
  EXPECT_TRUE(named(store.Delete({long_key}).status(), "max_key_bytes"));
  EXPECT_TRUE(named(store.Watch(long_key, 0, absl::Seconds(1)).status(),
                    "max_key_bytes"));
  EXPECT_TRUE(named(store.ListPage(long_key, "", 0).status(), "max_key_bytes"));
  EXPECT_TRUE(named(store.ListPage("", long_key, 0).status(), "max_key_bytes"));
  EXPECT_TRUE(named(store.Add(long_key, 1).status(), "max_key_bytes"));
  EXPECT_TRUE(named(store.Append(long_key, "v").status(), "max_key_bytes"));
  const std::vector<std::string> four = {"a", "b", "c", "d"};
  EXPECT_TRUE(named(store.Check(four).status(), "max_keys_per_request"));
  EXPECT_TRUE(named(store.Delete(four).status(), "max_keys_per_request"));
  EXPECT_TRUE(named(store.MultiGet(four, absl::ZeroDuration()).status(),
                    "max_keys_per_request"));
  EXPECT_EQ(core.Stats().parked_waits, 0);
}

// A timeout of years used to mean no deadline at all.
TEST(StoreCoreTest, WaitTimeoutsAreCutToTheMaximum) {
  Parked get;
  Parked watch;
  FakeStoreClock clock;
  StoreLimits limits;
  limits.max_timeout = absl::Seconds(5);
  StoreCore core(limits, &clock);
  core.MultiGet({"k"}, absl::Hours(24 * 365 * 2), get.GetDone());
  core.Watch("p/", 0, absl::InfiniteDuration(), watch.WatchDone());
  clock.Advance(absl::Seconds(5));
  ASSERT_TRUE(get.Await());
  ASSERT_TRUE(watch.Await());
  EXPECT_EQ(get.get().status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(watch.watch().ok());
  EXPECT_FALSE(watch.watch()->first);
  EXPECT_EQ(core.Stats().parked_waits, 0);
}

TEST(StoreCoreTest, ListingsComeInBoundedPages) {
  StoreLimits limits;
  limits.max_list_entries = 10;
  limits.max_list_bytes = 1000;
  StoreCore core(limits);
  LocalStore store(&core);
  for (int i = 0; i < 25; ++i) Set(core, absl::StrFormat("p/%02d", i), "v");
  Set(core, "q", "v");
  auto first = core.List("p/");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->entries.size(), 10u);
  EXPECT_TRUE(first->more);
  auto second = core.List("p/", first->entries.back().key, 100);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->entries.size(), 10u);
  EXPECT_EQ(second->entries.front().key, "p/10");
  auto third = core.List("p/", second->entries.back().key, 3);
  ASSERT_EQ(third->entries.size(), 3u);
  EXPECT_TRUE(third->more);
  auto last = core.List("p/", "p/22");
  ASSERT_EQ(last->entries.size(), 2u);
  EXPECT_FALSE(last->more);
  // A page stops at max_list_bytes, but holds at least one entry.
  Set(core, "big/a", std::string(600, 'x'));
  Set(core, "big/b", std::string(600, 'x'));
  Set(core, "big/c", std::string(1200, 'x'));
  EXPECT_EQ(core.List("big/")->entries.size(), 1u);
  EXPECT_EQ(core.List("big/", "big/a")->entries.size(), 1u);
  EXPECT_EQ(core.List("big/", "big/b")->entries.size(), 1u);
  // The interface's List pages through all of them.
  auto all = store.List("p/");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->entries.size(), 25u);
  EXPECT_EQ(all->entries.back().key, "p/24");
  EXPECT_FALSE(all->more);
  EXPECT_EQ(store.List("big/")->entries.size(), 3u);
}

TEST(StoreCoreTest, TombstonesCountAndGoFirstWhenMemoryIsShort) {
  StoreLimits limits;
  limits.max_total_bytes = 50 * StoreCore::kKeyOverhead;
  StoreCore core(limits);
  // Written and deleted many times more than fit: the tombstones they
  // leave make room for themselves by dropping the oldest.
  for (int i = 0; i < 500; ++i) {
    const std::string key = absl::StrCat("k", i);
    Set(core, key, "v");
    ASSERT_TRUE(core.Delete({key}).ok());
    ASSERT_LE(static_cast<size_t>(core.Stats().bytes), limits.max_total_bytes);
  }
  EXPECT_GT(core.Stats().bytes, 0);
}

TEST(StoreCoreTest, ThousandsOfParkedWaitsNeedNoThreads) {
  StoreCore core;
  std::atomic<int> answered{0};
  for (int i = 0; i < 5000; ++i) {
    core.MultiGet({"go"}, absl::Seconds(30),
                  [&](auto r) { answered += r.ok() ? 1 : 0; });
  }
  EXPECT_EQ(answered.load(), 0);
  ASSERT_TRUE(core.MultiSet({{"go", "1"}}, absl::ZeroDuration()).ok());
  EXPECT_EQ(answered.load(), 5000);
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

TEST(StoreCoreTest, LeaseRenewalIsNotAChange) {
  Parked w;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  const int64_t rev = Set(core, "p/alive", "1", absl::Seconds(10));
  Set(core, "p/alive", "1", absl::Seconds(10));
  core.Watch("p/", rev, absl::Milliseconds(50), w.WatchDone());
  clock.Advance(absl::Milliseconds(50));
  ASSERT_TRUE(w.Await());
  ASSERT_TRUE(w.watch().ok());
  EXPECT_FALSE(w.watch()->first);
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

TEST(StoreCoreIndexTest, WatchIsAnsweredByAWriteUnderItsPrefixOnly) {
  Parked w;
  StoreCore core;
  const int64_t rev = Set(core, "q/x", "1");
  core.Watch("p/", rev, absl::Seconds(30), w.WatchDone());
  Set(core, "q/y", "1");
  Set(core, "p", "1");  // "p" is not under "p/"
  Set(core, "o/zzz", "1");
  Set(core, "p0", "1");
  EXPECT_FALSE(w.answered());
  const int64_t under = Set(core, "p/k", "1");
  ASSERT_TRUE(w.answered());
  ASSERT_TRUE(w.watch().ok());
  EXPECT_TRUE(w.watch()->first);
  EXPECT_EQ(w.watch()->second, under);
}

TEST(StoreCoreIndexTest, NestedAndNeighbouringPrefixes) {
  const std::vector<std::string> prefixes = {
      "", "r", "r/", "r/a", "r/a/", "r/a/k", "r/a/k2", "r/ab", "r/b", "s"};
  std::deque<Parked> parked(prefixes.size());
  StoreCore core;
  const int64_t rev = Set(core, "zzz", "0");
  for (size_t i = 0; i < prefixes.size(); ++i) {
    core.Watch(prefixes[i], rev, absl::Seconds(30), parked[i].WatchDone());
  }
  Set(core, "r/a/k", "1");
  const std::vector<bool> want = {true, true,  true,  true,  true,
                                  true, false, false, false, false};
  for (size_t i = 0; i < prefixes.size(); ++i) {
    EXPECT_EQ(parked[i].answered(), want[i])
        << "prefix '" << prefixes[i] << "'";
  }
}

// Random keys and prefixes over a small alphabet, checked against the
// definition: a parked watch is answered by exactly the writes and deletes
// of keys that start with its prefix.
TEST(StoreCoreIndexTest, WatchesMatchABruteForceModel) {
  std::mt19937 rng(7);
  auto random_string = [&](int max_len) {
    std::string s(rng() % (max_len + 1), ' ');
    for (char& c : s) c = "ab/"[rng() % 3];
    return s;
  };
  std::vector<std::string> prefixes;
  for (int i = 0; i < 60; ++i) prefixes.push_back(random_string(4));
  std::deque<Parked> parked;
  StoreCore core;
  std::vector<Parked*> current(prefixes.size());
  int64_t rev = Set(core, "start", "0");
  for (size_t i = 0; i < prefixes.size(); ++i) {
    current[i] = &parked.emplace_back();
    core.Watch(prefixes[i], rev, absl::Seconds(60), current[i]->WatchDone());
  }
  for (int step = 0; step < 500; ++step) {
    const std::string key = random_string(6);
    if (rng() % 3 == 0) {
      auto n = core.Delete({key});
      ASSERT_TRUE(n.ok());
      if (*n == 0) continue;  // deleting nothing is no change
    } else {
      Set(core, key, std::to_string(step));
    }
    auto listing = core.List("");
    rev = listing->revision;
    for (size_t i = 0; i < prefixes.size(); ++i) {
      const bool under = key.compare(0, prefixes[i].size(), prefixes[i]) == 0;
      ASSERT_EQ(current[i]->answered(), under)
          << "step " << step << " key '" << key << "' prefix '" << prefixes[i]
          << "'";
      if (!under) continue;
      EXPECT_EQ(current[i]->watch()->second, rev);
      current[i] = &parked.emplace_back();
      core.Watch(prefixes[i], rev, absl::Seconds(60), current[i]->WatchDone());
    }
  }
}

TEST(StoreCoreIndexTest, GetWaiterIsAnsweredByItsKeysOnly) {
  Parked a, abc;
  StoreCore core;
  core.MultiGet({"a"}, absl::Seconds(30), a.GetDone());
  core.MultiGet({"a", "b", "c"}, absl::Seconds(30), abc.GetDone());
  Set(core, "b", "B");
  Set(core, "aa", "x");
  EXPECT_FALSE(a.answered());
  Set(core, "c", "C");
  Set(core, "a", "A");
  ASSERT_TRUE(a.answered());
  ASSERT_TRUE(a.get().ok());
  EXPECT_EQ(*a.get(), std::vector<std::string>{"A"});
  ASSERT_TRUE(abc.answered());
  EXPECT_EQ(*abc.get(), (std::vector<std::string>{"A", "B", "C"}));
}

TEST(StoreCoreIndexTest, GetWaiterNeedsAllKeysAtOnce) {
  Parked w;
  StoreCore core;
  core.MultiGet({"a", "b", "c", "a"}, absl::Seconds(30), w.GetDone());
  Set(core, "c", "C");
  Set(core, "a", "A");
  ASSERT_TRUE(core.Delete({"c"}).ok());
  Set(core, "b", "B");  // c is gone again
  EXPECT_FALSE(w.answered());
  Set(core, "a", "A2");
  EXPECT_FALSE(w.answered());
  ASSERT_TRUE(
      core.MultiSet({{"c", "C2"}, {"b", "B2"}}, absl::ZeroDuration()).ok());
  ASSERT_TRUE(w.answered());
  EXPECT_EQ(*w.get(), (std::vector<std::string>{"A2", "B2", "C2", "A2"}));
}

TEST(StoreCoreIndexTest, AddAppendAndCompareSetAnswerWaiters) {
  Parked add, append, cas, watch;
  StoreCore core;
  core.MultiGet({"n"}, absl::Seconds(30), add.GetDone());
  core.MultiGet({"s"}, absl::Seconds(30), append.GetDone());
  core.MultiGet({"c"}, absl::Seconds(30), cas.GetDone());
  core.Watch("", 0, absl::Seconds(30), watch.WatchDone());
  ASSERT_TRUE(core.Add("n", 3).ok());
  EXPECT_TRUE(watch.answered());
  ASSERT_TRUE(core.Append("s", "x").ok());
  ASSERT_TRUE(core.CompareSet("c", "", "v").ok());
  ASSERT_TRUE(add.answered() && append.answered() && cas.answered());
  EXPECT_EQ(add.get()->front(), "3");
  EXPECT_EQ(append.get()->front(), "x");
  EXPECT_EQ(cas.get()->front(), "v");
}

TEST(StoreCoreIndexTest, DeletionAnswersAParkedWatch) {
  Parked w;
  StoreCore core;
  Set(core, "other/k", "1");
  const int64_t rev = Set(core, "p/k", "1");
  core.Watch("p/", rev, absl::Seconds(30), w.WatchDone());
  ASSERT_TRUE(core.Delete({"other/k", "p/missing"}).ok());
  EXPECT_FALSE(w.answered());
  ASSERT_TRUE(core.Delete({"p/k"}).ok());
  ASSERT_TRUE(w.answered());
  EXPECT_TRUE(w.watch()->first);
}

TEST(StoreCoreIndexTest, ExpiryAnswersAParkedWatchAndOnlyItsPrefix) {
  Parked p, q;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  Set(core, "q/forever", "1");
  const int64_t rev = Set(core, "p/lease", "1", absl::Milliseconds(50));
  core.Watch("p/", rev, absl::Seconds(30), p.WatchDone());
  core.Watch("q/", rev, absl::Milliseconds(500), q.WatchDone());
  clock.Advance(absl::Milliseconds(50));
  ASSERT_TRUE(p.Await());
  ASSERT_TRUE(p.watch().ok());
  EXPECT_TRUE(p.watch()->first);
  EXPECT_GT(p.watch()->second, rev);
  EXPECT_FALSE(q.answered());
  clock.Advance(absl::Milliseconds(450));
  ASSERT_TRUE(q.Await());
  EXPECT_FALSE(q.watch()->first);  // timed out
  EXPECT_FALSE(*core.Check({"p/lease"}));
}

TEST(StoreCoreIndexTest, RenewedLeaseDoesNotExpire) {
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  // Renewed for twice its TTL, each renewal well within it.
  Set(core, "lease", "1", absl::Milliseconds(300));
  for (int i = 0; i < 12; ++i) {
    clock.Advance(absl::Milliseconds(50));
    Set(core, "lease", "1", absl::Milliseconds(300));
  }
  clock.Advance(absl::Milliseconds(299));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(30)));
  EXPECT_TRUE(*core.Check({"lease"}));
  // Appending keeps the lease; a write with no TTL makes it permanent.
  ASSERT_TRUE(core.Append("lease", "+").ok());
  Set(core, "lease", "2");
  clock.Advance(absl::Milliseconds(400));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(30)));
  EXPECT_TRUE(*core.Check({"lease"}));
  Set(core, "short", "1", absl::Milliseconds(20));
  ASSERT_TRUE(core.Append("short", "+").ok());
  clock.Advance(absl::Milliseconds(20));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(30)));
  EXPECT_FALSE(*core.Check({"short"}));
}

// The rendezvous lists, then watches from the listing's revision: a
// deletion or expiry in between must answer the watch at once, on a prefix
// watched before or not.
TEST(StoreCoreIndexTest, WatchFromAListingSeesALaterDeletion) {
  for (bool watched_before : {false, true}) {
    Parked earlier, w;
    StoreCore core;
    Set(core, "p/a", "1");
    Set(core, "p/b", "1");
    const int64_t listed = core.List("p/")->revision;
    if (watched_before) {
      core.Watch("p/", listed, absl::ZeroDuration(), earlier.WatchDone());
      ASSERT_FALSE(earlier.watch()->first);
    }
    Set(core, "other", "1");
    ASSERT_EQ(*core.Delete({"p/a"}), 1);
    Set(core, "other2", "1");
    core.Watch("p/", listed, absl::Seconds(30), w.WatchDone());
    ASSERT_TRUE(w.answered()) << watched_before;
    EXPECT_TRUE(w.watch()->first);
    // From after the deletion: nothing new.
    Parked later;
    core.Watch("p/", core.List("p/")->revision, absl::ZeroDuration(),
               later.WatchDone());
    EXPECT_FALSE(later.watch()->first);
  }
}

TEST(StoreCoreIndexTest, WatchFromAFutureRevisionWaitsForIt) {
  Parked w;
  StoreCore core;
  const int64_t rev = Set(core, "p/k", "0");
  core.Watch("p/", rev + 2, absl::Seconds(30), w.WatchDone());
  Set(core, "p/k", "1");
  Set(core, "p/k", "2");
  EXPECT_FALSE(w.answered());
  Set(core, "p/k", "3");
  EXPECT_TRUE(w.answered());
}

TEST(StoreCoreIndexTest, OldTombstonesAreDroppedAndCountAsChanges) {
  StoreLimits limits;
  limits.max_tombstones = 4;
  StoreCore core(limits);
  const int64_t before = Set(core, "x", "0");
  for (int i = 0; i < 20; ++i) {
    Set(core, "t/" + std::to_string(i), "1");
    ASSERT_EQ(*core.Delete({"t/" + std::to_string(i)}), 1);
  }
  const int64_t after = core.List("")->revision;
  // From before the dropped tombstones: answered "changed" at once, even
  // under a prefix that never held a key (the store cannot tell).
  for (const char* prefix : {"t/", "never/"}) {
    Parked w;
    core.Watch(prefix, before, absl::ZeroDuration(), w.WatchDone());
    EXPECT_TRUE(w.watch()->first) << prefix;
  }
  // From after them: exact.
  Parked quiet;
  core.Watch("nothing/", after - 1, absl::ZeroDuration(), quiet.WatchDone());
  EXPECT_FALSE(quiet.watch()->first);
  Parked kept;  // the newest deletion still has its tombstone
  core.Watch("t/19", after - 1, absl::ZeroDuration(), kept.WatchDone());
  EXPECT_TRUE(kept.watch()->first);
}

TEST(StoreCoreIndexTest, TimeoutsLimitAndCancelUnparkWaiters) {
  StoreLimits limits;
  limits.max_waiters = 3;
  std::deque<Parked> parked(6);
  FakeStoreClock clock;
  StoreCore core(limits, &clock);
  const int64_t rev = Set(core, "k", "v");
  core.MultiGet({"g"}, absl::Milliseconds(20), parked[0].GetDone());
  core.Watch("w/", rev, absl::Milliseconds(20), parked[1].WatchDone());
  core.MultiGet({"h"}, absl::Seconds(30), parked[2].GetDone());
  core.Watch("w/", rev, absl::Seconds(30), parked[3].WatchDone());
  ASSERT_TRUE(parked[3].answered());
  EXPECT_EQ(parked[3].watch().status().code(),
            absl::StatusCode::kResourceExhausted);
  clock.Advance(absl::Milliseconds(20));
  ASSERT_TRUE(parked[0].Await());
  EXPECT_EQ(parked[0].get().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(parked[1].Await());
  EXPECT_FALSE(parked[1].watch()->first);
  // Timed-out waiters left no index entries behind: a write of their key
  // or under their prefix answers nothing, and there is room again.
  Set(core, "g", "1");
  Set(core, "w/1", "1");
  core.Watch("w/", core.List("")->revision, absl::Seconds(30),
             parked[4].WatchDone());
  EXPECT_FALSE(parked[4].answered());
  core.CancelAll();
  for (int i : {2, 4}) {
    ASSERT_TRUE(parked[i].answered());
    EXPECT_EQ(i == 2 ? parked[i].get().status().code()
                     : parked[i].watch().status().code(),
              absl::StatusCode::kCancelled);
  }
  core.MultiGet({"never"}, absl::Seconds(30), parked[5].GetDone());
  ASSERT_TRUE(parked[5].answered());
  EXPECT_EQ(parked[5].get().status().code(), absl::StatusCode::kCancelled);
}

// The shape of a large rendezvous: thousands of nodes each parked on a
// watch of the run's prefix and one of their own, and heartbeat-like
// writes. Each write must cost about the waiters it answers, not all of
// them; the deadline is generous (sanitizers, a loaded machine), while a
// pass over every waiter and every key per write takes minutes here.
TEST(StoreCoreIndexTest, ThousandsOfWatchersAndWritesFinishQuickly) {
  constexpr int kNodes = 2000;
  constexpr int kRounds = 10;
  std::deque<Parked> parked;
  StoreCore core;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kNodes; ++i) {
    Set(core, "rdzv/run/alive/" + std::to_string(i), "1", absl::Seconds(60));
  }
  std::vector<Parked*> run_watch(kNodes), own_watch(kNodes);
  int64_t rev = core.List("rdzv/run/")->revision;
  for (int i = 0; i < kNodes; ++i) {
    run_watch[i] = &parked.emplace_back();
    core.Watch("rdzv/run/", rev, absl::Seconds(60), run_watch[i]->WatchDone());
    own_watch[i] = &parked.emplace_back();
    core.Watch("node/" + std::to_string(i) + "/", rev, absl::Seconds(60),
               own_watch[i]->WatchDone());
  }
  for (int round = 0; round < kRounds; ++round) {
    // Heartbeats outside the run's prefix, each answering one node.
    for (int i = 0; i < kNodes; ++i) {
      rev =
          Set(core, "node/" + std::to_string(i) + "/hb", std::to_string(round));
      ASSERT_TRUE(own_watch[i]->answered());
      own_watch[i] = &parked.emplace_back();
      core.Watch("node/" + std::to_string(i) + "/", rev, absl::Seconds(60),
                 own_watch[i]->WatchDone());
    }
    // Lease renewals: no change, no answer.
    for (int i = 0; i < kNodes; ++i) {
      Set(core, "rdzv/run/alive/" + std::to_string(i), "1", absl::Seconds(60));
    }
    for (Parked* w : run_watch) ASSERT_FALSE(w->answered());
    // One change under the run's prefix answers every node, which relists
    // and watches again from the listing.
    Set(core, "rdzv/run/state", std::to_string(round));
    rev = core.List("rdzv/run/state")->revision;
    for (int i = 0; i < kNodes; ++i) {
      ASSERT_TRUE(run_watch[i]->answered());
      run_watch[i] = &parked.emplace_back();
      core.Watch("rdzv/run/", rev, absl::Seconds(60),
                 run_watch[i]->WatchDone());
    }
  }
  // Gets parked on distinct keys, each answered by its own key.
  std::vector<Parked*> gets(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    gets[i] = &parked.emplace_back();
    core.MultiGet({"rdzv/run/rank/" + std::to_string(i)}, absl::Seconds(60),
                  gets[i]->GetDone());
  }
  for (int i = 0; i < kNodes; ++i) {
    Set(core, "rdzv/run/rank/" + std::to_string(i), "r");
    ASSERT_TRUE(gets[i]->answered());
    if (i + 1 < kNodes) {
      ASSERT_FALSE(gets[i + 1]->answered());
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(20))
      << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
      << " ms";
}

// The host's own view of its store: closing it ends its blocking calls
// (its watcher thread must not wait out keep_alive_interval at exit), not
// the store, which still serves everyone else.
TEST(LocalStoreTest, CloseEndsBlockingCallsInFlightAndLaterOnes) {
  StoreLimits one_waiter;
  one_waiter.max_waiters = 1;  // so that a second wait tells the first parked
  StoreCore core(one_waiter);
  LocalStore view(&core);
  LocalStore other(&core);
  absl::StatusOr<std::pair<bool, int64_t>> watched;
  absl::Notification returned;
  std::thread watcher([&] {
    do {  // until it, not the probe below, holds the one waiter's place
      watched = view.Watch("k", core.List("k")->revision, absl::Seconds(60));
    } while (absl::IsResourceExhausted(watched.status()));
    returned.Notify();
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!absl::IsResourceExhausted(
             other.MultiGet({"absent"}, absl::Milliseconds(1)).status()) &&
         absl::Now() < deadline) {
  }
  view.Close();
  ASSERT_TRUE(returned.WaitForNotificationWithTimeout(absl::Seconds(10)));
  watcher.join();
  EXPECT_EQ(watched.status().code(), absl::StatusCode::kCancelled);
  const absl::Time start = absl::Now();
  EXPECT_EQ(view.MultiGet({"absent"}, absl::Seconds(60)).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(view.Set("k", "v").ok());  // writes still reach the store
  auto v = other.MultiGet({"k"}, absl::Seconds(10));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0], "v");
}

// Closing the view answers its caller and also frees the core's waiter,
// which would otherwise stay parked (memory, a waiter's place) until its
// timeout.
TEST(LocalStoreTest, CloseCancelsTheParkedWaitInTheCore) {
  StoreCore core;
  LocalStore view(&core);
  absl::StatusOr<std::pair<bool, int64_t>> watched;
  std::thread watcher([&] {
    watched = view.Watch("k", core.List("k")->revision, absl::Seconds(60));
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (core.Stats().parked_waits == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(core.Stats().parked_waits, 1);
  view.Close();
  watcher.join();
  EXPECT_EQ(watched.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(core.Stats().parked_waits, 0);
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

// A rendezvous member's monitor: the state keys, the waiting nodes and one
// lease among many. Another lease's expiry must not wake it (at thousands
// of members, one expiry woke them all); its own lease's must, saying so.
TEST(StoreCoreWatchAnyTest, OnlyTheWatchedLeaseOfManyWakesIt) {
  Parked first, second;
  FakeStoreClock clock;
  StoreCore core(StoreLimits{}, &clock);
  Set(core, "ctl/state", "open");
  Set(core, "ctl/alive/b", "1", absl::Seconds(3));
  const int64_t rev = Set(core, "ctl/alive/c", "1", absl::Seconds(1));
  const std::vector<std::string> prefixes = {"ctl/state", "ctl/waiting/",
                                             "ctl/alive/b"};
  core.WatchAny(prefixes, rev, absl::Hours(1), first.WatchAnyDone());
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(10)));
  ASSERT_TRUE(clock.AwaitNextRead(absl::Seconds(10)));
  ASSERT_FALSE(*core.Check({"ctl/alive/c"}));
  // c's expiry did not answer it: the state's write does, and is the
  // change it reports (the first under its prefixes).
  Set(core, "ctl/state", "closed");
  ASSERT_TRUE(first.Await());
  ASSERT_TRUE(first.watch_any().ok());
  ASSERT_TRUE(first.watch_any()->change.has_value());
  EXPECT_EQ(first.watch_any()->change->key, "ctl/state");
  EXPECT_EQ(first.watch_any()->change->value, "closed");

  const int64_t from = first.watch_any()->revision;
  core.WatchAny(prefixes, from, absl::Hours(1), second.WatchAnyDone());
  clock.Advance(absl::Seconds(2));  // b's lease runs out at 3 s
  ASSERT_TRUE(second.Await());
  ASSERT_TRUE(second.watch_any().ok());
  EXPECT_TRUE(second.watch_any()->changed);
  ASSERT_TRUE(second.watch_any()->change.has_value());
  EXPECT_EQ(second.watch_any()->change->key, "ctl/alive/b");
  EXPECT_FALSE(second.watch_any()->change->value.has_value());
  EXPECT_GT(second.watch_any()->change->revision, from);
}

// Each new prefix costs a scan under the store's lock: one watch naming
// thousands would make one request cost thousands of scans.
TEST(StoreCoreWatchAnyTest, RefusesMorePrefixesThanTheLimit) {
  StoreCore core;
  const int64_t rev = Set(core, "zzz", "0");
  std::vector<std::string> prefixes;
  for (int i = 0; i < 9; ++i) prefixes.push_back(absl::StrCat("p", i, "/"));
  Parked refused;
  core.WatchAny(prefixes, rev, absl::Hours(1), refused.WatchAnyDone());
  ASSERT_TRUE(refused.answered());
  EXPECT_TRUE(absl::IsInvalidArgument(refused.watch_any().status()))
      << refused.watch_any().status();
  EXPECT_EQ(refused.watch_any().status().message(),
            "watch of 9 prefixes: at most 8 (max_watch_prefixes)");
  EXPECT_EQ(core.Stats().parked_waits, 0);
  // Eight are a watch like any other.
  prefixes.pop_back();
  Parked parked;
  core.WatchAny(prefixes, rev, absl::Hours(1), parked.WatchAnyDone());
  EXPECT_FALSE(parked.answered());
  EXPECT_EQ(core.Stats().parked_waits, 1);
  Set(core, "p7/k", "v");
  ASSERT_TRUE(parked.answered());
  ASSERT_TRUE(parked.watch_any().ok()) << parked.watch_any().status();
  EXPECT_TRUE(parked.watch_any()->changed);
}

TEST(StoreCoreWatchAnyTest, SaysWhatChangedOnlyWhenItIsTheOneChange) {
  StoreCore core;
  const int64_t rev = Set(core, "zzz", "0");
  const std::vector<std::string> prefixes = {"s", "w/"};
  // One write under a prefix: told with its value and revision.
  Parked one;
  core.WatchAny(prefixes, rev, absl::Hours(1), one.WatchAnyDone());
  const int64_t written = Set(core, "s", "round 2");
  ASSERT_TRUE(one.answered());
  ASSERT_TRUE(one.watch_any().ok());
  ASSERT_TRUE(one.watch_any()->change.has_value());
  EXPECT_EQ(one.watch_any()->change->key, "s");
  EXPECT_EQ(one.watch_any()->change->value, "round 2");
  EXPECT_EQ(one.watch_any()->change->revision, written);
  // Two in one request, under either prefix: changed, but not told what.
  Parked two;
  core.WatchAny(prefixes, written, absl::Hours(1), two.WatchAnyDone());
  ASSERT_TRUE(
      core.MultiSet({{"w/x", "1"}, {"s", "round 3"}}, absl::ZeroDuration())
          .ok());
  ASSERT_TRUE(two.answered());
  ASSERT_TRUE(two.watch_any().ok());
  EXPECT_TRUE(two.watch_any()->changed);
  EXPECT_FALSE(two.watch_any()->change.has_value());
  // Answered at once from the past: changed, not told what.
  Parked past;
  core.WatchAny(prefixes, written, absl::Hours(1), past.WatchAnyDone());
  ASSERT_TRUE(past.answered());
  EXPECT_TRUE(past.watch_any()->changed);
  EXPECT_FALSE(past.watch_any()->change.has_value());
  // A write elsewhere in the same request leaves the change told.
  Parked mixed;
  core.WatchAny(prefixes, past.watch_any()->revision, absl::Hours(1),
                mixed.WatchAnyDone());
  ASSERT_TRUE(
      core.MultiSet({{"w/y", "1"}, {"elsewhere", "1"}}, absl::ZeroDuration())
          .ok());
  ASSERT_TRUE(mixed.answered());
  ASSERT_TRUE(mixed.watch_any()->change.has_value());
  EXPECT_EQ(mixed.watch_any()->change->key, "w/y");
  // No prefix at all is refused.
  Parked none;
  core.WatchAny({}, 0, absl::Seconds(1), none.WatchAnyDone());
  ASSERT_TRUE(none.answered());
  EXPECT_EQ(none.watch_any().status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distjob
