#include "agent/stoppable_wait.h"

#include <atomic>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RunStoppableTest, AStepThatEndsOnItsOwnIsNotCancelled) {
  std::atomic<int> cancels{0};
  StoppableWait wait;
  wait.what = "a step";
  wait.step = [] {};
  wait.stop = [] { return false; };
  wait.cancel = [&] { ++cancels; };
  EXPECT_FALSE(RunStoppable(wait));
  wait.stop = nullptr;  // no stop to watch for
  EXPECT_FALSE(RunStoppable(wait));
  EXPECT_EQ(cancels, 0);
}

TEST(RunStoppableTest, AStopCancelsTheStepOnceAfterTheGrace) {
  absl::Notification release;
  std::atomic<int> cancels{0};
  std::atomic<bool> stopped{false};
  absl::Time stop_seen = absl::InfiniteFuture(),
             cancelled = absl::InfinitePast();
  StoppableWait wait;
  wait.what = "a step";
  wait.step = [&] {
    stopped = true;  // a stop arrives while the step waits
    release.WaitForNotification();
  };
  wait.stop = [&] {
    if (stopped && stop_seen == absl::InfiniteFuture()) stop_seen = absl::Now();
    return stopped.load();
  };
  wait.grace = absl::Milliseconds(200);
  wait.cancel = [&] {
    ++cancels;
    cancelled = absl::Now();
    release.Notify();
  };
  EXPECT_TRUE(RunStoppable(wait));
  EXPECT_EQ(cancels, 1);
  EXPECT_GE(cancelled - stop_seen, wait.grace);
}

// A step that ignores the cancel for longer than `overrun` is still
// waited for, and the log says what is stuck.
// A step that hangs past its own bound (a store that accepts and never
// answers) is cancelled at the deadline, with no stop.
TEST(RunStoppableTest, TheDeadlineCancelsAHungStep) {
  absl::Notification release;
  std::atomic<int> cancels{0};
  StoppableWait wait;
  wait.what = "a step";
  wait.step = [&] { release.WaitForNotification(); };
  wait.stop = [] { return false; };
  wait.cancel = [&] {
    ++cancels;
    release.Notify();
  };
  const absl::Time start = absl::Now();
  wait.deadline = start + absl::Milliseconds(200);
  EXPECT_TRUE(RunStoppable(wait));
  EXPECT_EQ(cancels, 1);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
}

TEST(RunStoppableTest, AStepOutlivingTheCancelIsLogged) {
  InitLogging(LogLevel::kInfo);
  absl::Notification cancelled;
  StoppableWait wait;
  wait.what = "a stubborn step";
  wait.poll = absl::Milliseconds(5);
  wait.overrun = absl::Milliseconds(20);
  wait.stop = [] { return true; };
  wait.cancel = [&] { cancelled.Notify(); };
  std::atomic<bool> ended{false};
  wait.step = [&] {
    cancelled.WaitForNotificationWithTimeout(absl::Seconds(10));
    // Stands for a step the cancel does not reach: ends only well past
    // the overrun.
    const absl::Time late = absl::Now() + absl::Milliseconds(100);
    while (absl::Now() < late) absl::SleepFor(absl::Milliseconds(1));
    ended = true;
  };
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  EXPECT_TRUE(RunStoppable(wait));
  const std::string log = testing::internal::GetCapturedStdout() +
                          testing::internal::GetCapturedStderr();
  EXPECT_TRUE(ended);
  EXPECT_NE(log.find("a stubborn step: still waiting"), std::string::npos)
      << log;
}

// A long step says, once per interval, what it still waits for; a short
// one says nothing.
TEST(RunStoppableTest, ALongStepLogsWhatItAwaitsOncePerInterval) {
  InitLogging(LogLevel::kInfo);
  std::atomic<int> asked{0};
  StoppableWait wait;
  wait.what = "a round";
  wait.poll = absl::Milliseconds(5);
  wait.progress_interval = absl::Milliseconds(100);
  wait.progress = [&] {
    ++asked;
    return std::string("round 0 (1/2 nodes joined: a; missing: b)");
  };
  wait.step = [] { absl::SleepFor(absl::Milliseconds(350)); };
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  EXPECT_FALSE(RunStoppable(wait));
  const std::string log = testing::internal::GetCapturedStdout() +
                          testing::internal::GetCapturedStderr();
  EXPECT_GE(asked, 2);
  EXPECT_LE(asked, 4);
  EXPECT_NE(log.find("still waiting for round 0 (1/2 nodes joined: a; "
                     "missing: b) ("),
            std::string::npos)
      << log;
  asked = 0;
  wait.step = [] {};
  EXPECT_FALSE(RunStoppable(wait));
  EXPECT_EQ(asked, 0);
}

}  // namespace
}  // namespace distjob
