#include "supervisor/timer_table.h"

#include <csignal>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

TimerRequest Set(pid_t pid, const std::string& scope, int seconds,
                 int signal = SIGKILL) {
  TimerRequest r;
  r.pid = pid;
  r.scope_id = scope;
  r.expiration = kT0 + absl::Seconds(seconds);
  r.signal = signal;
  return r;
}

TimerRequest Release(pid_t pid, const std::string& scope) {
  TimerRequest r;
  r.pid = pid;
  r.scope_id = scope;
  r.release = true;
  return r;
}

TEST(TimerTableTest, EmptyTableNeverExpires) {
  TimerTable table;
  EXPECT_EQ(table.NextExpiry(), absl::InfiniteFuture());
  EXPECT_TRUE(table.TakeExpired(kT0 + absl::Hours(1)).empty());
}

TEST(TimerTableTest, ExpiresInOrderOneEntryPerPid) {
  TimerTable table;
  EXPECT_EQ(table.Apply(Set(20, "b", 5)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(10, "a", 3)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(10, "c", 4, SIGTERM)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(30, "d", 9)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.NextExpiry(), kT0 + absl::Seconds(3));

  EXPECT_TRUE(table.TakeExpired(kT0 + absl::Seconds(2)).empty());
  auto expired = table.TakeExpired(kT0 + absl::Seconds(5));
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[0].pid, 10);
  EXPECT_EQ(expired[0].scope_id, "a");  // its earliest
  EXPECT_EQ(expired[0].signal, SIGKILL);
  EXPECT_EQ(expired[1].pid, 20);
  // Both of pid 10's timers went with it; pid 30's is left.
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.NextExpiry(), kT0 + absl::Seconds(9));
}

TEST(TimerTableTest, TheFirstExpiredTimerWithASignalIsSent) {
  TimerTable table;
  table.Apply(Set(10, "quiet", 1, 0));
  table.Apply(Set(10, "loud", 2, SIGTERM));
  auto expired = table.TakeExpired(kT0 + absl::Seconds(3));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].scope_id, "loud");
  EXPECT_EQ(expired[0].signal, SIGTERM);
}

TEST(TimerTableTest, NoSignalAtAllIsZero) {
  TimerTable table;
  table.Apply(Set(10, "quiet", 1, -5));
  auto expired = table.TakeExpired(kT0 + absl::Seconds(3));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].signal, 0);
}

TEST(TimerTableTest, ReleaseAndRearm) {
  TimerTable table;
  table.Apply(Set(10, "step", 2));
  EXPECT_EQ(table.Apply(Release(10, "step")), TimerTable::Outcome::kReleased);
  EXPECT_EQ(table.Apply(Release(10, "step")), TimerTable::Outcome::kNotHeld);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.TakeExpired(kT0 + absl::Seconds(3)).empty());

  // Set again with a later expiry: only the later one counts.
  table.Apply(Set(10, "step", 2));
  table.Apply(Set(10, "step", 8));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.NextExpiry(), kT0 + absl::Seconds(8));
  EXPECT_TRUE(table.TakeExpired(kT0 + absl::Seconds(3)).empty());
}

TEST(TimerTableTest, ScopesOfOnePidAreSeparate) {
  TimerTable table;
  table.Apply(Set(10, "outer", 5));
  table.Apply(Set(10, "inner", 2));
  table.Apply(Release(10, "inner"));
  EXPECT_EQ(table.NextExpiry(), kT0 + absl::Seconds(5));
}

TEST(TimerTableTest, DeadPidsAreDropped) {
  TimerTable table;
  table.Apply(Set(10, "a", 1));
  table.Apply(Set(10, "b", 2));
  table.Apply(Set(11, "a", 3));
  EXPECT_EQ(table.DropPid(10), 2u);
  EXPECT_EQ(table.DropPid(10), 0u);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.NextExpiry(), kT0 + absl::Seconds(3));
}

TEST(TimerTableTest, CapsBoundAFlood) {
  TimerTable table(TimerLimits{/*per_pid=*/3, /*total=*/5});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(table.Apply(Set(10, std::to_string(i), 5)),
              TimerTable::Outcome::kSet);
  }
  EXPECT_EQ(table.Apply(Set(10, "x", 5)), TimerTable::Outcome::kPidFull);
  // Re-arming a held scope is not a new timer.
  EXPECT_EQ(table.Apply(Set(10, "0", 6)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(11, "a", 5)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(12, "a", 5)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(13, "a", 5)), TimerTable::Outcome::kTableFull);
  EXPECT_EQ(table.size(), 5u);
  // A release frees a place.
  table.Apply(Release(10, "1"));
  EXPECT_EQ(table.Apply(Set(13, "a", 5)), TimerTable::Outcome::kSet);
  EXPECT_EQ(table.Apply(Set(10, "y", 5)), TimerTable::Outcome::kTableFull);
}

TEST(TimerTableTest, ClearEmptiesEverything) {
  TimerTable table(TimerLimits{/*per_pid=*/1, /*total=*/1});
  table.Apply(Set(10, "a", 1));
  table.Clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.Apply(Set(10, "b", 1)), TimerTable::Outcome::kSet);
}

}  // namespace
}  // namespace distjob
