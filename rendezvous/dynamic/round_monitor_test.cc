#include "rendezvous/dynamic/round_monitor.h"

#include <atomic>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

constexpr absl::Duration kInterval = absl::Milliseconds(100);
constexpr absl::Duration kWithin = absl::Seconds(10);

// Node n0 holds closed round 1 of "job" (`size` of up to `max` nodes),
// closed at the revision its state was written at; its ring is itself.
class RoundMonitorTest : public ::testing::Test {
 protected:
  ExitBarrier::Deps ExitDeps() {
    ExitBarrier::Deps d;
    d.store = &store_;
    d.keys = &keys_;
    d.node = "n0";
    d.exit_barrier_timeout = absl::Seconds(1);
    d.keep_alive_interval = kInterval;
    d.lease = 3 * kInterval;
    d.wait_status = &wait_status_;
    d.store_lost = &store_lost_;
    d.cancelled = &cancelled_;
    return d;
  }
  RoundMonitor::Deps MonitorDeps(int max) {
    return {&store_,     &keys_,    "n0",          false,  max,
            kWithin,     kInterval, 3 * kInterval, &exit_, &store_lost_,
            &host_left_, &changed_, &closed_};
  }
  RdzvState Hold(RoundMonitor* monitor, int size) {
    RdzvState st;
    st.round = 1;
    st.closed = true;
    st.closer = "n0";
    st.size = size;
    st.world_size = size;
    auto revision = store_.Set(keys_.State(), st.Encode());
    EXPECT_TRUE(revision.ok());
    RankRecord mine;
    mine.next = "n0";
    monitor->SetOnChange([this] { fired_.Notify(); });
    monitor->Hold(st, mine, revision.ok() ? *revision : 0);
    return st;
  }

  // The monitor's watch is parked: a change after it is one it is told of
  // (a change before would answer it from the store's past, unnamed).
  void AwaitParkedWatch() {
    const absl::Time deadline = absl::Now() + kWithin;
    while (core_.Stats().parked_waits == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_EQ(core_.Stats().parked_waits, 1);
  }

  StoreCore core_;
  LocalStore store_{&core_};
  const RdzvKeys keys_{"job"};
  WaitStatus wait_status_;
  std::atomic<bool> store_lost_{false}, cancelled_{false}, host_left_{false},
      changed_{false}, closed_{false};
  ExitBarrier exit_{ExitDeps()};
  absl::Notification fired_;
};

TEST_F(RoundMonitorTest, ARoundReopenedFiresAndIsHandedToTheNextJoin) {
  RoundMonitor monitor(MonitorDeps(1));
  const RdzvState st = Hold(&monitor, 1);
  EXPECT_TRUE(monitor.monitoring());
  AwaitParkedWatch();
  ASSERT_TRUE(store_.Set(keys_.State(), NextRound(st, 0).Encode()).ok());
  ASSERT_TRUE(fired_.WaitForNotificationWithTimeout(kWithin));
  EXPECT_TRUE(changed_);
  EXPECT_FALSE(monitor.monitoring());
  // What reopened the round is the next join's first read.
  const RoundMonitor::Seen seen = monitor.Pause();
  ASSERT_TRUE(seen.reopened.has_value());
  EXPECT_EQ(seen.reopened->key, keys_.State());
  EXPECT_EQ(seen.current.round, 1);
  EXPECT_EQ(seen.aborted, "");
}

TEST_F(RoundMonitorTest, TheJobsEndIsSeenAndAcknowledged) {
  RoundMonitor monitor(MonitorDeps(1));
  Hold(&monitor, 1);
  AwaitParkedWatch();
  ASSERT_TRUE(store_.Set(keys_.Aborted(), "node n1 exited").ok());
  ASSERT_TRUE(fired_.WaitForNotificationWithTimeout(kWithin));
  EXPECT_EQ(monitor.aborted(), "node n1 exited");
  // The node that ended it waits for this before it takes the store away.
  EXPECT_TRUE(store_.Get(keys_.SeenEnd("n0"), kWithin).ok());
}

TEST_F(RoundMonitorTest, ANodeAskingToJoinARoundWithRoomFires) {
  RoundMonitor monitor(MonitorDeps(2));
  Hold(&monitor, 1);
  AwaitParkedWatch();
  ASSERT_TRUE(store_.Set(keys_.Waiting("n1"), "1 closed").ok());
  ASSERT_TRUE(fired_.WaitForNotificationWithTimeout(kWithin));
}

TEST_F(RoundMonitorTest, AnAbandonedMonitorNeverCallsBack) {
  RoundMonitor monitor(MonitorDeps(1));
  const RdzvState st = Hold(&monitor, 1);
  monitor.Abandon();
  EXPECT_TRUE(monitor.abandoned());
  EXPECT_FALSE(monitor.monitoring());
  ASSERT_TRUE(store_.Set(keys_.State(), NextRound(st, 0).Encode()).ok());
  monitor.Stop();
  EXPECT_FALSE(fired_.HasBeenNotified());
  EXPECT_FALSE(changed_);
}

}  // namespace
}  // namespace distjob
