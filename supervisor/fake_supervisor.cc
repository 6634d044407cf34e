#include "supervisor/fake_supervisor.h"

#include <utility>

namespace distjob {

GroupResult FailedGroup(int exit_code, int local_rank) {
  GroupResult group;
  group.outcome = GroupOutcome::kFailed;
  WorkerExit exit;
  exit.local_rank = local_rank;
  exit.pid = 1000 + local_rank;
  exit.exit_code = exit_code;
  if (exit_code > 128) exit.term_signal = exit_code - 128;
  exit.time = absl::Now();
  group.exits.push_back(exit);
  group.first_failure = exit;
  return group;
}

GroupResult GroupWith(GroupOutcome outcome) {
  GroupResult group;
  group.outcome = outcome;
  return group;
}

absl::StatusOr<GroupResult> FakeSupervisor::RunGroup(
    const std::vector<WorkerSpec>& workers) {
  script_->groups_run.push_back(workers);
  if (script_->groups.empty()) {
    return absl::InternalError(
        "fake supervisor: no group result scripted for this attempt");
  }
  FakeGroupStep step = std::move(script_->groups.front());
  script_->groups.pop_front();
  if (on_group_running_) on_group_running_(true);
  if (step.during) step.during();
  // A hang is declared by stopping the group: its failure is seen only
  // after, when the callback no longer runs.
  if (step.result.ok() && step.result->outcome == GroupOutcome::kFailed &&
      !step.result->hang && on_first_failure_) {
    on_first_failure_();
  }
  if (on_group_running_) on_group_running_(false);
  return step.result;
}

bool FakeSupervisor::Sleep(absl::Duration duration) {
  const int index = static_cast<int>(script_->sleeps.size());
  script_->sleeps.push_back(duration);
  if (script_->on_sleep) script_->on_sleep(index);
  if (index == script_->stop_in_sleep) {
    script_->stop_signal = script_->stop_signal_number;
  }
  return script_->stop_signal == 0;
}

}  // namespace distjob
