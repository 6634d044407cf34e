// A scripted SupervisorInterface for the agent loop's tests: RunGroup
// returns the results the test lined up, starting no process, and every
// call the loop makes is recorded.
#ifndef DISTJOB_SUPERVISOR_FAKE_SUPERVISOR_H_
#define DISTJOB_SUPERVISOR_FAKE_SUPERVISOR_H_

#include <atomic>
#include <csignal>
#include <deque>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "supervisor/supervisor.h"

namespace distjob {

// One RunGroup call's script.
struct FakeGroupStep {
  absl::StatusOr<GroupResult> result;
  // Runs inside RunGroup, while the group would be running (e.g. to fire a
  // membership change, which interrupts it).
  std::function<void()> during;
};

// What a test scripts and reads back. It outlives the fake, which the agent
// loop owns and destroys before returning.
struct FakeSupervisorScript {
  // RunGroup's results in order. Past the end RunGroup fails (Internal),
  // so a loop that runs more groups than scripted ends visibly.
  std::deque<FakeGroupStep> groups;
  // A stop signal that arrives during Sleep number `stop_in_sleep`
  // (0-based; -1: none): that Sleep returns false.
  int stop_in_sleep = -1;
  int stop_signal_number = SIGTERM;
  // Runs at every Sleep, with its index (e.g. to fire a membership change
  // while the loop waits for one).
  std::function<void(int)> on_sleep;

  // Recorded.
  std::vector<std::vector<WorkerSpec>> groups_run;
  std::vector<absl::Duration> sleeps;
  std::atomic<int> interrupts{0};
  int drains = 0;
  int stop_signal = 0;  // what stop_signal() answers
};

// A GroupResult whose first failure is local rank `local_rank` exiting
// `exit_code` (128+N: killed by signal N).
GroupResult FailedGroup(int exit_code, int local_rank = 0);
GroupResult GroupWith(GroupOutcome outcome);

class FakeSupervisor : public SupervisorInterface {
 public:
  explicit FakeSupervisor(FakeSupervisorScript* script) : script_(script) {}

  // Pops the next step, runs its `during`, then, for a failed group that
  // did not hang, the first-failure callback, as the real one does before
  // it stops the group.
  absl::StatusOr<GroupResult> RunGroup(
      const std::vector<WorkerSpec>& workers) override;
  bool Sleep(absl::Duration duration) override;
  void Interrupt() override { ++script_->interrupts; }
  void ClearInterrupt() override {}
  void DrainDescendants() override { ++script_->drains; }
  void set_on_group_running(std::function<void(bool)> callback) override {
    on_group_running_ = std::move(callback);
  }
  void set_on_first_failure(std::function<void()> callback) override {
    on_first_failure_ = std::move(callback);
  }
  int PollStopSignal() override { return script_->stop_signal; }
  int stop_signal() const override { return script_->stop_signal; }

 private:
  FakeSupervisorScript* const script_;
  std::function<void(bool)> on_group_running_;
  std::function<void()> on_first_failure_;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_FAKE_SUPERVISOR_H_
