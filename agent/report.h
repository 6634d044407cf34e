// What the agent leaves behind when it exits (docs/supervision.md: "Supervision
// and reporting"): the Kubernetes termination message and torchelastic's
// root-cause error file.
#ifndef DISTJOB_AGENT_REPORT_H_
#define DISTJOB_AGENT_REPORT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {

// The kubelet keeps at most 4096 bytes of a container's message.
inline constexpr size_t kTerminationMessageLimit = 4096;

struct RootCause {
  int local_rank = 0;
  int pid = -1;
  int exit_code = 0;
  int term_signal = 0;
  absl::Time time;
  std::string error_file;  // the worker's TORCHELASTIC_ERROR_FILE
  std::string reason;      // e.g. "cannot execute 'x': No such file"
  int rank = -1;           // global rank; -1: not known
  std::string host;        // this node's hostname
  // The exception that ended the worker ("KeyError: 'lr'") and the last
  // lines of its traceback, from its error file, else its stderr.
  std::string exception;
  std::string traceback;
  // The restart policy's decision, as the agent logged it.
  std::string decision;
  // The failed attempt's files, kept after the agent exits.
  std::string logs;
};

struct RunReport {
  // success, permanent, retryable, stopped, exec-failed, rendezvous, error
  std::string outcome;
  int exit_code = 0;
  int stop_signal = 0;  // the signal that stopped the agent, 0 if none
  int restarts = 0;
  int max_restarts = 0;
  bool oom = false;
  bool hang = false;
  std::optional<RootCause> root_cause;
  // Why the job ended when no local worker is to blame (e.g. the
  // rendezvous error naming another node's root cause); "" for none.
  std::string detail;
  // The last attempt's diagnostics file (evidence before its workers were
  // stopped; agent/diagnostics), "" for none.
  std::string diagnostics;
};

// `text` cut to at most `limit` bytes without splitting a UTF-8 sequence;
// invalid sequences (bad bytes, surrogates, overlong forms, code points
// beyond U+10FFFF) become U+FFFD first, so the result is always valid UTF-8.
std::string Utf8Truncate(absl::string_view text, size_t limit);

// The termination message's line for an agent stopped by `signal_number`
// while it waited: "stopped by SIGTERM while waiting for <what>". `what`
// may itself read "stopped while waiting for <what>" (a wait's Cancelled
// status); "" names no wait.
std::string StoppedWhileWaiting(int signal_number, absl::string_view what);

// The human-readable message: one summary line, then the root cause and
// the tail of its error, at most kTerminationMessageLimit bytes.
std::string FormatTerminationMessage(const RunReport& report);

// The block that ends a failed job's console on every node: who failed
// (rank, host, code or signal), its exception and traceback, the decision
// and where its files are.
std::string FormatRootCauseBlock(const RootCause& cause);

// The termination message on one line, short enough for a store value and
// for the other nodes' own messages (the job's end reason).
std::string EndReason(const RunReport& report);

// The exit code in the message of a job another node ended ("the job
// ended: node N exited: distjob-agent: permanent exit_code=1 ..."), as
// that node's termination message put it; nullopt when it says none.
std::optional<int> EndedJobExitCode(absl::string_view message);

// Warns (once, at start) of a --termination-log or --error-file that is a
// FIFO, socket or directory: it is skipped at the exit, which must never
// block on it (common/files.h OpenOutputFile).
void WarnOfUnwritableOutputs(const std::string& termination_log,
                             const std::string& error_file);

// Writes `message` to `path`, replacing it. Errors name the path.
absl::Status WriteTerminationMessage(const std::string& path,
                                     absl::string_view message);

// The message torchelastic's @record wrote into `error_file`, or "" when
// there is none.
std::string ReadWorkerErrorMessage(const std::string& error_file);

// Writes the root cause into `path` in torchelastic's error-file shape:
// the worker's own JSON if it wrote one, else a synthesised
// {"message": {"message": ..., "extraInfo": {...}}}, with
// message.errorCode set to the worker's exit code, as torchelastic's
// ErrorHandler.dump_error_file does.
absl::Status WriteRootCauseErrorFile(const std::string& path,
                                     const RootCause& cause);

// A report of `outcome` with `exit_code` after `restarts` of
// `max_restarts`; the rest is filled in as the run knows it.
RunReport MakeRunReport(const std::string& outcome, int exit_code, int restarts,
                        int max_restarts);

// Tells the outcome: `report`'s summary line in the log, its termination
// message at `termination_log` and its root cause's error file at
// `error_file` (each "" for none). A file that cannot be written is
// logged: the exit code still goes out.
void PublishReport(const RunReport& report, const std::string& termination_log,
                   const std::string& error_file);

}  // namespace distjob

#endif  // DISTJOB_AGENT_REPORT_H_
