// What an exit status means for the job: the classes of the README's exit-code
// table.
//   0        success
//   1..127   permanent: a bug or bad input; restarting will not help
//   128..255 retryable: killed (128+signal), preempted, or told to retry
// Users can move individual codes between classes, or choose torchrun's
// policy of restarting on any failure.
#ifndef DISTJOB_SUPERVISOR_EXIT_POLICY_H_
#define DISTJOB_SUPERVISOR_EXIT_POLICY_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

enum class ExitClass { kSuccess, kPermanent, kRetryable };

std::string ExitClassName(ExitClass c);

// A wait(2) status as one exit code: the exit status, or 128+N for a death
// by signal N (the shell's convention, and what Kubernetes reports).
int ExitCodeFromWaitStatus(int wait_status);

struct ExitPolicy {
  std::set<int> permanent_overrides;    // codes forced permanent
  std::set<int> retryable_overrides;    // codes forced retryable
  bool restart_on_any_failure = false;  // torchrun's policy

  ExitClass Classify(int exit_code) const;
};

// "1,2,10-20": codes 1..255, ranges inclusive.
absl::StatusOr<std::set<int>> ParseExitCodeList(absl::string_view text);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_EXIT_POLICY_H_
