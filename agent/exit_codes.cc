#include "agent/exit_codes.h"

namespace distjob {

int ExitCodeForSignal(int signal_number) {
  return kExitSignalBase + signal_number;
}

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitSuccess;
    // What the user gave is wrong (a flag, a file it names, a value the
    // store holds for the job): retrying the same pod cannot help.
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kAlreadyExists:
    // The store refused this pod's token: the same secret is refused again.
    case absl::StatusCode::kUnauthenticated:
      return kExitBadConfig;
    // Someone else is not there yet, or ended the job: a new pod may find
    // them.
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return kExitRendezvousUnavailable;
    default:
      return kExitInternalError;
  }
}

}  // namespace distjob
