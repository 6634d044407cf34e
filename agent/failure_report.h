// Why an attempt failed, as the restart policy and every report see it:
// the root-cause worker, the error it left (its torchelastic error file,
// else the end of its stderr) and the policy's reading of it
// (supervisor/failure_cause.h).
#ifndef DISTJOB_AGENT_FAILURE_REPORT_H_
#define DISTJOB_AGENT_FAILURE_REPORT_H_

#include <string>

#include "agent/report.h"
#include "supervisor/failure_cause.h"
#include "supervisor/supervisor.h"
#include "supervisor/worker_logs.h"

namespace distjob {

struct FailureReport {
  WorkerExit exit;
  int exit_code = 0;  // what the failure counts as (see ExamineFailure)
  int rank = 0;       // global
  std::string host;
  FailureCause cause;
  // Rank, exception type and message: equal for the same failure seen
  // again. "" when the worker left no exception to compare (a signal, an
  // exit code alone): such failures never count as repeated.
  std::string signature;
  // The failed attempt's directory of this worker's files; "" without one.
  std::string logs;
  // What the user may change (InterpreterHint); "" for nothing.
  std::string hint;
  // Another node's failure, read from its offer (agent/peer_failure.h):
  // its worker, files and logs are on `host`, not here.
  bool from_peer = false;
};

// Reads group.first_failure's error and classifies it. `exit_code` is the
// code the failure counts as (a hung worker that exited 0 counts as
// SIGTERM's).
FailureReport ExamineFailure(const GroupResult& group, int exit_code, bool oom,
                             const WorkerLogs& files, int attempt,
                             int base_rank, const CausePolicy& policy);

// The decision's log line: "rank 3 (local_rank 1, pid 42) failed with exit
// code 1: KeyError: 'lr': KeyError is a programming error: not restarting
// (...)". `outcome` says what the agent
// does ("restarting (1/3)", "not restarting ...").
std::string DecisionLine(const FailureReport& report,
                         const std::string& outcome);

// What the report says of `failure`, the worker that failed in `attempt`
// (`command`: its program, named when it could not be executed).
RootCause MakeRootCause(const WorkerExit& failure, const WorkerLogs& files,
                        int attempt, const std::string& command);

}  // namespace distjob

#endif  // DISTJOB_AGENT_FAILURE_REPORT_H_
