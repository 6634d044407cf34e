// Blocking reads and watches, against a real etcd or none.
#include <atomic>
#include <filesystem>
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

TEST_F(EtcdStoreTest, BlockingGetAndWatchWakeOnAnotherClientsWrite) {
  auto store = Open("job");
  // A writer: it holds the job's lease, so the keys outlive `other`.
  ASSERT_TRUE(store->Set("mine", "x").ok());
  auto listing = store->List("");
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  std::thread setter([&] {
    auto other = Open("job");
    // Written only once the reader's watch is parked on etcd: the test is
    // of the blocking path, not of a value already there.
    AwaitWatcherAbove(watchers);
    ASSERT_TRUE(other->Set("late", "v").ok());
  });
  EXPECT_EQ(*store->Get("late", absl::Seconds(20)), "v");
  setter.join();
  auto w = store->Watch("", listing->revision, absl::Seconds(5));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->first);
  auto quiet = store->Watch("", w->second, absl::Milliseconds(300));
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(quiet->first);
  auto now = store->Watch("", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->first);
  EXPECT_FALSE(store->Watch("", w->second, absl::ZeroDuration())->first);
}

// A rendezvous monitor's watch: a few prefixes at once, any of which
// answers it, and none of the keys beside them.
TEST_F(EtcdStoreTest, WatchAnyIsAnsweredByAnyOfItsPrefixesOnly) {
  auto store = Open("job");
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_TRUE(store->Set("c/x", "1").ok());
  auto quiet =
      store->WatchAny({"a/", "b/"}, listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->changed);
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  int64_t written = -1;
  std::thread setter([&] {
    auto other = Open("job");
    AwaitWatcherAbove(watchers);
    ASSERT_TRUE(other->Set("c/y", "1").ok());  // beside both: not a change
    auto rev = other->Set("b/k", "v");
    ASSERT_TRUE(rev.ok());
    written = *rev;
  });
  auto w = store->WatchAny({"a/", "b/"}, listing->revision, absl::Seconds(20));
  setter.join();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->changed);
  EXPECT_GE(w->revision, written);  // not answered by c/y before it
  EXPECT_EQ(*store->Get("b/k", absl::ZeroDuration()), "v");
  auto now =
      store->WatchAny({"a/", "b/"}, listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->changed);
}

// A watch that sees nothing change ends at the caller's deadline when that
// comes before its own timeout, and is "unchanged": the cluster answered.
TEST_F(EtcdStoreTest, AQuietWatchEndsAtTheCallersDeadline) {
  auto store = Open("job");
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  {
    const absl::Time start = absl::Now();
    ScopedCallDeadline soon(start + absl::Milliseconds(500));
    auto w = store->WatchAny({"quiet/"}, listing->revision, absl::Seconds(60));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_FALSE(w->changed);
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
  // A window that ends before etcd can answer says nothing of etcd's
  // health: a blocking read near its end is still a timeout.
  auto brief =
      store->WatchAny({"quiet/"}, listing->revision, absl::Microseconds(1));
  ASSERT_TRUE(brief.ok()) << brief.status();
  EXPECT_FALSE(brief->changed);
  EXPECT_EQ(store->MultiGet({"never"}, absl::Microseconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// No member holds the watch: an error naming the cluster, not "no change"
// (the rendezvous monitor counts errors towards read_timeout and then
// reports the store lost), by the caller's deadline.
TEST(EtcdStoreNoServerTest, AWatchOfAnUnreachableClusterFailsNamingIt) {
  auto o = ParseEtcdOptions("127.0.0.1:1,127.0.0.1:2", "", "job");
  ASSERT_TRUE(o.ok());
  auto store = EtcdStore::Connect(*o);
  ASSERT_TRUE(store.ok());
  for (const absl::Duration timeout : {absl::Seconds(1), absl::Seconds(60)}) {
    const absl::Time start = absl::Now();
    ScopedCallDeadline within(start + absl::Seconds(2));
    auto w = (*store)->WatchAny({"x/"}, 0, timeout);
    EXPECT_EQ(w.status().code(), absl::StatusCode::kUnavailable) << w.status();
    EXPECT_NE(w.status().message().find("127.0.0.1:1,127.0.0.1:2"),
              std::string::npos)
        << w.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
}

TEST_F(EtcdStoreTest, CloseCancelsABlockedWatchAndLaterCalls) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("k", "v").ok());
  auto listing = store->List("");
  absl::StatusOr<std::pair<bool, int64_t>> w;
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  const absl::Time start = absl::Now();
  std::thread watcher(
      [&] { w = store->Watch("", listing->revision, absl::Seconds(60)); });
  // Closed once the watch is parked on etcd: the blocked path is tested.
  AwaitWatcherAbove(watchers);
  store->Close();
  watcher.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kCancelled) << w.status();
  EXPECT_EQ(store->Get("k", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kCancelled);
}

// The threads of this process (Linux: one entry each in /proc/self/task).
int Threads() {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;  // counted, not read
    ++n;
  }
  return n;
}

// A parked watch costs its caller's thread only: a timer thread per watch
// call, to end it at its deadline, doubled the threads of a client whose
// callers park watches (every node's monitor, bench/store_bench.cc's
// simulated nodes sharing one client).
TEST_F(EtcdStoreTest, AParkedWatchTakesNoThreadOfItsOwn) {
  auto store = Open("job");
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  const int before = Threads();
  constexpr int kWatches = 16;
  std::vector<std::thread> callers;
  for (int i = 0; i < kWatches; ++i) {
    callers.emplace_back([&] {
      // Ended by Close below: only the threads it held are looked at.
      (void)store->WatchAny({"quiet/"}, listing->revision, absl::Seconds(60));
    });
  }
  AwaitWatcherAbove(watchers + kWatches - 1);
  const int during = Threads();
  store->Close();
  for (auto& t : callers) t.join();
  EXPECT_LT(during - before, kWatches + kWatches / 2)
      << before << " threads before " << kWatches << " parked watches, "
      << during << " while they were parked";
}

}  // namespace
}  // namespace distjob
