#include "agent/failure_report.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/net.h"

namespace distjob {

FailureReport ExamineFailure(const GroupResult& group, int exit_code, bool oom,
                             const WorkerLogs& files, int attempt,
                             int base_rank, const CausePolicy& policy) {
  FailureReport report;
  report.exit = *group.first_failure;
  report.exit_code = exit_code;
  report.rank = base_rank + report.exit.local_rank;
  report.host = LocalHostname();
  FailureEvidence evidence;
  evidence.exit_code = exit_code;
  evidence.term_signal = report.exit.term_signal;
  evidence.exec_failed = report.exit.exec_errno != 0;
  evidence.hang = group.hang;
  evidence.oom = oom;
  // The error file holds the exception @record caught; without one (most
  // scripts), the traceback Python printed on stderr.
  evidence.error_text =
      ReadWorkerErrorMessage(files.ErrorFile(attempt, report.exit.local_rank));
  if (FindPythonException(evidence.error_text).type.empty()) {
    evidence.error_text = files.StderrTail(attempt, report.exit.local_rank);
  }
  report.cause = ClassifyFailure(evidence, policy);
  if (!report.cause.exception.line.empty()) {
    report.signature =
        absl::StrCat("rank ", report.rank, " ", report.cause.exception.line);
  }
  if (files.enabled()) {
    report.logs = files.AttemptDir(attempt, report.exit.local_rank);
  }
  return report;
}

std::string DecisionLine(const FailureReport& report,
                         const std::string& outcome) {
  std::string line = absl::StrCat(
      "rank ", report.rank, " (local_rank ", report.exit.local_rank, ", pid ",
      report.exit.pid,
      report.from_peer ? absl::StrCat(" on host ", report.host) : "",
      ") failed with exit code ", report.exit_code, ": ");
  if (!report.cause.exception.line.empty()) {
    absl::StrAppend(&line, report.cause.exception.line, ": ");
  }
  absl::StrAppend(&line, report.cause.rule, ": ", outcome);
  return line;
}

RootCause MakeRootCause(const WorkerExit& failure, const WorkerLogs& files,
                        int attempt, const std::string& command) {
  RootCause cause;
  cause.local_rank = failure.local_rank;
  cause.pid = failure.pid;
  cause.exit_code = failure.exit_code;
  cause.term_signal = failure.term_signal;
  cause.time = failure.time;
  cause.error_file = files.ErrorFile(attempt, failure.local_rank);
  if (failure.exec_errno != 0) {
    cause.reason = absl::StrCat("cannot execute '", command,
                                "': ", std::strerror(failure.exec_errno));
  }
  return cause;
}

}  // namespace distjob
