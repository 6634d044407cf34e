// Why a worker failed, and whether restarting can help: the restart
// policy's table (docs/supervision.md, "Restart policy").
//
// A worker's exit code does not say why it failed: a lost peer, a gloo or
// NCCL connection reset, a CUDA ECC error and a KeyError all end a Python
// worker with 1. So the policy reads the worker's own account of the
// failure (the torchelastic error file, else the last lines of its
// stderr), finds the exception that ended it, and decides by rule:
//   - restart: exits by signal, OOM kills, hangs; communication errors of
//     gloo, NCCL and c10d, connection and timeout errors, CUDA errors other
//     than a device-side assert; the user's --retryable-error-pattern and
//     --retryable-exit-codes; an exception the table does not know;
//   - stop: programming errors (SyntaxError, ImportError, NameError,
//     TypeError, KeyError, ...), a device-side assert, exec failures,
//     --permanent-exit-codes, and an exit 1..127 with no exception to read.
// Every decision names its rule, for the one log line that explains it.
#ifndef DISTJOB_SUPERVISOR_FAILURE_CAUSE_H_
#define DISTJOB_SUPERVISOR_FAILURE_CAUSE_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace distjob {

// --restart-policy.
enum class RestartPolicy {
  kAuto,     // by cause (this file's table); `run`'s default
  kAny,      // every failure restarts within the budget (torchrun's)
  kClasses,  // by exit-code class alone (1..127 stop, 128..255 restart)
};

// auto | any | classes; anything else is InvalidArgument.
absl::StatusOr<RestartPolicy> ParseRestartPolicy(absl::string_view text);
const char* RestartPolicyName(RestartPolicy policy);

// One --retryable-error-pattern, compiled once when the flag is read.
class ErrorPattern {
 public:
  // InvalidArgument naming RE2's complaint for a pattern that does not
  // compile.
  static absl::StatusOr<ErrorPattern> Compile(absl::string_view pattern);
  const std::string& pattern() const { return pattern_; }
  // Whether the pattern matches anywhere in `text`.
  bool Matches(absl::string_view text) const;

 private:
  std::string pattern_;
  std::shared_ptr<const re2::RE2> re_;
};

struct CausePolicy {
  RestartPolicy policy = RestartPolicy::kAuto;
  std::set<int> permanent_exit_codes;
  std::set<int> retryable_exit_codes;
  std::vector<ErrorPattern> retryable_patterns;
};

// What is known of one failed worker.
struct FailureEvidence {
  int exit_code = 0;    // its exit status, or 128+signal
  int term_signal = 0;  // 0 when it exited
  bool exec_failed = false;
  bool hang = false;
  bool oom = false;
  // The worker's error file message and traceback, else its stderr's tail.
  std::string error_text;
};

// The exception that ended a Python program, read from its traceback.
struct PythonException {
  std::string type;     // "KeyError", "torch.distributed.DistNetworkError"
  std::string line;     // "KeyError: 'lr'" (the first line of it)
  std::string excerpt;  // the traceback's last lines, exception included
};

// The last traceback in `text` and its exception; empty fields when there
// is none. `max_lines` bounds the excerpt.
PythonException FindPythonException(absl::string_view text,
                                    size_t max_lines = 12);

struct FailureCause {
  bool restart = false;
  // The rule that decided, as the log line says it: "KeyError is a
  // programming error", "a gloo communication error".
  std::string rule;
  // The error says a peer or the network went away: it may be the
  // consequence of another node's failure, to be checked before it is
  // charged to this node.
  bool peer_communication = false;
  // Decided from what the error says of the infrastructure (a text rule
  // or a connection error's type): another pod may not meet it.
  bool infrastructure = false;
  PythonException exception;
};

FailureCause ClassifyFailure(const FailureEvidence& evidence,
                             const CausePolicy& policy);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_FAILURE_CAUSE_H_
