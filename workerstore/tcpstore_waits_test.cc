#include "workerstore/tcpstore_waits.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distjob {
namespace {

std::vector<uint64_t> Ids(const std::vector<TcpStoreWaits::Woken>& woken) {
  std::vector<uint64_t> ids;
  for (const auto& w : woken) ids.push_back(w.id);
  return ids;
}

TEST(TcpStoreWaitsTest, AKeyAnswersTheWaitsItCompletesOldestFirst) {
  TcpStoreWaits waits;
  waits.Park(1, 10, {"/a", "/b"});
  waits.Park(2, 20, {"/a"});
  waits.Park(3, 30, {"/a"});
  const std::vector<TcpStoreWaits::Woken> woken = waits.Arrived("/a");
  EXPECT_EQ(Ids(woken), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(woken[0].conn, 20u);
  EXPECT_EQ(waits.size(), 1u);
  EXPECT_TRUE(waits.Arrived("/a").empty());  // wait 1 no longer misses it
  EXPECT_EQ(Ids(waits.Arrived("/b")), (std::vector<uint64_t>{1}));
  EXPECT_EQ(waits.size(), 0u);
  EXPECT_EQ(waits.bytes(), 0u);
}

TEST(TcpStoreWaitsTest, AQueueItemAnswersOnlyTheOldestWaitItCompletes) {
  TcpStoreWaits waits;
  waits.Park(1, 10, {"/other", "/q"});  // misses another key too
  waits.Park(2, 20, {"/q"});
  waits.Park(3, 30, {"/q"});
  auto first = waits.ArrivedOnce("/q");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->id, 2u);
  EXPECT_EQ(first->conn, 20u);
  EXPECT_EQ(waits.size(), 2u);
  // For wait 1 the queue has come: /other completes it.
  EXPECT_EQ(Ids(waits.Arrived("/other")), std::vector<uint64_t>{1});
  EXPECT_EQ(waits.ArrivedOnce("/q")->id, 3u);
  EXPECT_FALSE(waits.ArrivedOnce("/q").has_value());
  EXPECT_EQ(waits.size(), 0u);
  EXPECT_EQ(waits.bytes(), 0u);
}

// A wait on a queue and a key, or on two queues, completes once each has
// come, in either order: no item is the one that completes it until the
// last one comes.
TEST(TcpStoreWaitsTest, AWaitOnQueuesCompletesOnceEachHasCome) {
  TcpStoreWaits waits;
  waits.Park(1, 10, {"/a", "/q"});
  waits.Park(2, 20, {"/q1", "/q2"});
  waits.Park(3, 30, {"/a", "/q"});
  EXPECT_FALSE(waits.ArrivedOnce("/q").has_value());
  EXPECT_FALSE(waits.ArrivedOnce("/q1").has_value());
  EXPECT_EQ(Ids(waits.Arrived("/a")), (std::vector<uint64_t>{1, 3}));
  auto w = waits.ArrivedOnce("/q2");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->id, 2u);
  EXPECT_EQ(w->conn, 20u);
  EXPECT_EQ(waits.size(), 0u);
  EXPECT_EQ(waits.bytes(), 0u);
}

TEST(TcpStoreWaitsTest, ADroppedWaitIsAnsweredByNothing) {
  TcpStoreWaits waits;
  waits.Park(1, 10, {"/a", "/b"});
  waits.Park(2, 10, {"/q"});
  const size_t both = waits.bytes();
  waits.Drop(1);
  waits.Drop(2);
  waits.Drop(7);  // unknown: ignored
  EXPECT_TRUE(waits.Arrived("/a").empty());
  EXPECT_FALSE(waits.ArrivedOnce("/q").has_value());
  EXPECT_EQ(waits.size(), 0u);
  EXPECT_EQ(waits.bytes(), 0u);
  EXPECT_EQ(both,
            TcpStoreWaits::Bytes({"/a", "/b"}) + TcpStoreWaits::Bytes({"/q"}));
}

TEST(TcpStoreWaitsTest, BytesCountEachKeyTwice) {
  EXPECT_EQ(TcpStoreWaits::Bytes({"/ab", "/c"}) - TcpStoreWaits::Bytes({}),
            2u * (3 + 2));
}

// A queue item goes to one waiting popper and visits each wait that also
// misses another key once (the queue has come for it, and it leaves the
// key's index). A push that passed the poppers still parked to find those
// waits (one set per key, scanned) would take 2e10 steps here, 200,000
// pushes against 200,000 parked poppers, where the split index takes one
// step a push and visits the 200,000 others once; the test would then fail
// on its time limit (bazel's, for a medium test: 300 s), not on a clock.
TEST(TcpStoreWaitsTest, AQueueItemVisitsEachWaitItDoesNotCompleteOnce) {
  constexpr uint64_t kWaits = 200000;
  TcpStoreWaits waits;
  for (uint64_t id = 1; id <= kWaits; ++id) {
    waits.Park(id, id, {"/q", "/missing/" + std::to_string(id)});
  }
  for (uint64_t id = kWaits + 1; id <= 2 * kWaits; ++id) {
    waits.Park(id, id, {"/q"});
  }
  for (uint64_t push = 0; push < kWaits; ++push) {
    auto popper = waits.ArrivedOnce("/q");
    ASSERT_TRUE(popper.has_value());
    ASSERT_EQ(popper->id, kWaits + 1 + push);  // oldest first
  }
  EXPECT_EQ(waits.size(), kWaits);
  EXPECT_EQ(Ids(waits.Arrived("/missing/7")), std::vector<uint64_t>{7});
}

}  // namespace
}  // namespace distjob
