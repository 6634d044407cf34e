#include "rendezvous/store_core.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace distjob {
namespace {

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
  StoreCore core;
  LocalStore store(&core);
  std::thread setter([&] {
    // The getter parks first or not: either way it must see the value.
    ASSERT_TRUE(store.Set("late", "x").ok());
  });
  EXPECT_EQ(*store.Get("late", absl::Seconds(10)), "x");
  setter.join();
  EXPECT_EQ(store.Get("never", absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(StoreCoreTest, LeaseExpiresOnServerClockAndWakesWatchers) {
  StoreCore core;
  LocalStore store(&core);
  auto rev = store.Set("p/alive", "1", absl::Milliseconds(100));
  ASSERT_TRUE(rev.ok());
  auto w = store.Watch("p/", *rev, absl::Seconds(10));
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->first);
  EXPECT_FALSE(*store.Check({"p/alive"}));
}

TEST(StoreCoreTest, WatchIgnoresOtherPrefixesAndTimesOut) {
  StoreCore core;
  LocalStore store(&core);
  auto rev = store.Set("other", "1");
  auto w = store.Watch("p/", *rev, absl::Milliseconds(50));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->first);
}

TEST(StoreCoreTest, OverLimitRequestsAreRejected) {
  StoreLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_total_bytes = 64;
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
  StoreCore core;
  LocalStore store(&core);
  auto rev = store.Set("p/alive", "1", absl::Seconds(10));
  ASSERT_TRUE(store.Set("p/alive", "1", absl::Seconds(10)).ok());
  auto w = store.Watch("p/", *rev, absl::Milliseconds(50));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->first);
}

}  // namespace
}  // namespace distjob
