// The supervisor's stop of a group with a worker SIGKILL cannot end: a
// process in uninterruptible sleep (D) runs on after SIGKILL until its I/O
// returns, which may be never (a dead NFS server, a wedged GPU driver). No
// test can make one (FUSE waits are killable), so a worker stands for it:
// it ignores SIGTERM and writes its own entry in a fake /proc
// (SupervisorOptions::proc_root), and the test's signal sender withholds
// SIGKILL from every pid that fake /proc lists, as the kernel defers it.
// Everything else (spawning, SIGTERM, reaping, the drain) is real.
#include "supervisor/supervisor.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "supervisor/evidence.h"
#include "supervisor/thread_states.h"

namespace distjob {
namespace {

// A shell worker that ignores SIGTERM (inherited by the exec'd sleep),
// writes /proc/<its pid>/task/<its pid>/{stat,wchan} under the fake root
// with `state`, says it is ready, and sleeps.
std::vector<std::string> StuckWorker(const std::string& dir, char state) {
  return {"/bin/sh", "-c",
          absl::StrCat("trap '' TERM; t=\"$1/proc/$$/task/$$\"; mkdir -p "
                       "\"$t\"; echo \"$$ (python3) ",
                       std::string(1, state),
                       " 1\" > \"$t/stat\"; echo request_wait_answer > "
                       "\"$t/wchan\"; touch \"$1/ready\"; exec sleep 120"),
          "sh", dir};
}

// A worker that fails (exit 3) once the stuck one is ready, so that the
// stop finds it ignoring SIGTERM.
std::vector<std::string> FailingWorker(const std::string& dir) {
  return {"/bin/sh", "-c",
          "i=0; while [ ! -e \"$1/ready\" ] && [ $i -lt 3000 ]; do "
          "sleep 0.01; i=$((i+1)); done; exit 3",
          "sh", dir};
}

class UnkillableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/unkillable_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    options_.proc_root = dir_ + "/proc";
    options_.shutdown_timeout = absl::Milliseconds(500);
    options_.evidence_budget = absl::Seconds(1);
  }

  void TearDown() override {
    // The withheld SIGKILLs are delivered for real, and their pids reaped.
    Release();
    if (releaser_.joinable()) releaser_.join();
    for (pid_t pid : Withheld()) waitpid(pid, nullptr, 0);
  }

  // kill(2), but SIGKILL to a pid the fake /proc lists is withheld.
  int Send(pid_t target, int signal_number) {
    const pid_t pid = target < 0 ? -target : target;
    if (signal_number == SIGKILL &&
        !ReadThreadStates(options_.proc_root, pid).threads.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      withheld_.insert(pid);
      changed_.notify_all();
      return 0;
    }
    return ::kill(target, signal_number);
  }

  std::set<pid_t> Withheld() {
    std::lock_guard<std::mutex> lock(mu_);
    return withheld_;
  }

  // From another thread: once a SIGKILL was withheld, waits `delay` (or
  // until released) and delivers it for real: the dying process of a
  // killable state, or the end of a test the supervisor would hang.
  void ReleaseLater(absl::Duration delay) {
    releaser_ = std::thread([this, delay] {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [this] { return !withheld_.empty() || released_; });
      changed_.wait_for(lock, absl::ToChronoMilliseconds(delay),
                        [this] { return released_; });
      for (pid_t pid : withheld_) ::kill(pid, SIGKILL);
    });
  }

  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    changed_.notify_all();
  }

  std::unique_ptr<Supervisor> Create() {
    auto supervisor = Supervisor::Create(
        options_, [this](pid_t pid, int sig) { return Send(pid, sig); });
    EXPECT_TRUE(supervisor.ok()) << supervisor.status();
    return supervisor.ok() ? *std::move(supervisor) : nullptr;
  }

  std::vector<WorkerSpec> Workers(char stuck_state) const {
    std::vector<WorkerSpec> workers(2);
    workers[0].local_rank = 0;
    workers[0].process.argv = FailingWorker(dir_);
    workers[1].local_rank = 1;
    workers[1].process.argv = StuckWorker(dir_, stuck_state);
    return workers;
  }

  std::string dir_;
  SupervisorOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::set<pid_t> withheld_;
  bool released_ = false;
  std::thread releaser_;
};

TEST_F(UnkillableTest, AWorkerInDStateIsReportedAndNotWaitedFor) {
  std::unique_ptr<Supervisor> supervisor = Create();
  ASSERT_NE(supervisor, nullptr);
  // Were it waited for, the test would end here after 30 s, failing.
  ReleaseLater(absl::Seconds(30));
  const absl::Time start = absl::Now();
  auto result = supervisor->RunGroup(Workers('D'));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(result.ok()) << result.status();

  ASSERT_EQ(Withheld().size(), 1u);
  // SIGKILL after the 0.5 s grace period, given up on 5 s later; the drain
  // after it does not wait for the abandoned worker again.
  EXPECT_GE(took, absl::Milliseconds(5500));
  EXPECT_LT(took, absl::Milliseconds(8000));
  EXPECT_EQ(result->unkillable, std::vector<int>{1});
  // The attempt ends as its cause decides: rank 0's failure.
  EXPECT_EQ(result->outcome, GroupOutcome::kFailed);
  ASSERT_TRUE(result->first_failure.has_value());
  EXPECT_EQ(result->first_failure->local_rank, 0);
  EXPECT_EQ(result->first_failure->exit_code, 3);
  EXPECT_FALSE(result->hang);
  // The evidence before SIGKILL names it unkillable, with its wait channel.
  ASSERT_EQ(result->evidence.size(), 2u);
  const Evidence& before_kill = result->evidence.back();
  EXPECT_EQ(before_kill.reason, "the grace period ended");
  EXPECT_EQ(UnkillableRanks(before_kill), std::vector<int>{1});
  ASSERT_EQ(before_kill.workers.size(), 1u);
  EXPECT_EQ(before_kill.workers[0].processes[0].threads[0].wchan,
            "request_wait_answer");
  // Its exit is not invented: it has none yet.
  for (const WorkerExit& e : result->exits) EXPECT_NE(e.local_rank, 1);
}

TEST_F(UnkillableTest, AWorkerSlowToDieButNotInDStateIsWaitedFor) {
  std::unique_ptr<Supervisor> supervisor = Create();
  ASSERT_NE(supervisor, nullptr);
  // Asleep (S): SIGKILL is on its way, only slow (the double delivers it
  // 6.5 s late, past the 5 s check for D).
  ReleaseLater(absl::Milliseconds(6500));
  auto result = supervisor->RunGroup(Workers('S'));
  ASSERT_TRUE(result.ok()) << result.status();

  EXPECT_TRUE(result->unkillable.empty());
  bool killed = false;
  for (const WorkerExit& e : result->exits) {
    if (e.local_rank == 1) killed = e.term_signal == SIGKILL;
  }
  EXPECT_TRUE(killed);
  EXPECT_EQ(result->outcome, GroupOutcome::kFailed);
}

}  // namespace
}  // namespace distjob
