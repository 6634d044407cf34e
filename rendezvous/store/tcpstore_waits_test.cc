#include "rendezvous/store/tcpstore_waits.h"

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
  // Wait 1 still misses the queue: the item may be popped before /other.
  EXPECT_EQ(Ids(waits.Arrived("/other")), std::vector<uint64_t>{});
  auto second = waits.ArrivedOnce("/q");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->id, 1u);  // now it misses only /q, and is older than 3
  EXPECT_EQ(waits.ArrivedOnce("/q")->id, 3u);
  EXPECT_FALSE(waits.ArrivedOnce("/q").has_value());
  EXPECT_EQ(waits.size(), 0u);
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

// A queue item used to scan every wait parked on its key for one it
// completes, so waits that also miss another key (within max_waiters,
// which is 65,536 by default) made each push cost all of them: here
// 200,000 pushes over 200,000 such waits, 4e10 steps, where the index of
// the waits each key completes takes one step a push. The test then fails
// on its time limit (bazel's, for a medium test: 300 s) rather than any clock.
TEST(TcpStoreWaitsTest, AQueueItemCostsNothingForWaitsItDoesNotComplete) {
  constexpr uint64_t kWaits = 200000;
  TcpStoreWaits waits;
  for (uint64_t id = 1; id <= kWaits; ++id) {
    waits.Park(id, id, {"/q", "/missing/" + std::to_string(id)});
  }
  for (uint64_t push = 0; push < kWaits; ++push) {
    ASSERT_FALSE(waits.ArrivedOnce("/q").has_value());
  }
  EXPECT_EQ(waits.size(), kWaits);
}

}  // namespace
}  // namespace distjob
