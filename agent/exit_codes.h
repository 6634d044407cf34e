// Every exit code the agent produces itself, in one place; a worker's own
// code passes through unchanged. The codes keep to the classes of
// supervisor/exit_policy.h, which is how operators read them: 1..127 ends
// the job, 128..255 is retried.
#ifndef DISTJOB_AGENT_EXIT_CODES_H_
#define DISTJOB_AGENT_EXIT_CODES_H_

#include "absl/status/status.h"

namespace distjob {

inline constexpr int kExitSuccess = 0;
// A check subcommand's "no": `health` found the service not serving,
// `status` found no such rendezvous.
inline constexpr int kExitCheckFailed = 1;
// Bad flags, environment or input files: a one-line error names them.
inline constexpr int kExitBadConfig = 2;
// A bug or an unexpected failure of the agent itself (EX_SOFTWARE of
// sysexits.h): permanent, and distinct from a worker's usual exit 1 so the
// pod's status does not blame the training script.
inline constexpr int kExitInternalError = 70;
// --max-no-progress-restarts consecutive attempts failed without any sign
// of progress: restarting again would only repeat them, so the job ends on
// every node with this permanent code (outside sysexits' 64-78 and the
// shell's 126-127, so the pod's status tells it apart).
inline constexpr int kExitNoProgress = 81;
// The worker command exists but cannot be executed / was not found (the
// shell's codes, set by the worker's exec failure).
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitCommandNotFound = 127;
// Stopped by signal N: 128+N, the shell's and Kubernetes' convention.
inline constexpr int kExitSignalBase = 128;
// The rendezvous, its store or the peers' DNS stayed unreachable past the
// timeout, or another node ended the job: retryable, and the one code every
// Kubeflow training-operator version retries.
inline constexpr int kExitRendezvousUnavailable = 138;
// The job's restarts are spent on failures another pod may not meet
// (communication, network, CUDA errors) whose worker exited 1..127: the
// same retryable code, for the same reason.
inline constexpr int kExitRetryElsewhere = 138;

// 128 + `signal_number`.
int ExitCodeForSignal(int signal_number);

// The agent's exit code for an error that ends the run:
//   OK                                             kExitSuccess
//   InvalidArgument, NotFound, FailedPrecondition,
//   OutOfRange, PermissionDenied, AlreadyExists,
//   Unauthenticated                                kExitBadConfig
//   Unavailable, DeadlineExceeded, Aborted         kExitRendezvousUnavailable
//   anything else, Cancelled included              kExitInternalError
// A Cancelled that a stop signal caused ends with ExitCodeForSignal; the
// caller, who knows the signal, handles it before asking here.
int ExitCodeFor(const absl::Status& status);

}  // namespace distjob

#endif  // DISTJOB_AGENT_EXIT_CODES_H_
