// The attempt's diagnostics file, attempt_<n>/diagnostics.json beside the
// workers' logs: what the supervisor saw of each worker before stopping or
// killing it (supervisor/evidence), and the tail of each worker's stderr,
// where the --hang-signal stack dump (e.g. faulthandler) lands.
#ifndef DISTJOB_AGENT_DIAGNOSTICS_H_
#define DISTJOB_AGENT_DIAGNOSTICS_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/observer.h"
#include "common/json.h"
#include "supervisor/supervisor.h"
#include "supervisor/worker_logs.h"

namespace distjob {

// Of each worker's stderr, at most this many of the last bytes.
inline constexpr size_t kDiagnosticsStderrBytes = 32 * 1024;

// The file's document for `attempt` of `nproc` workers.
Json DiagnosticsJson(const GroupResult& group, const WorkerLogs& files,
                     int attempt, int nproc);

// Writes the document when `group` carries evidence; the file's path, ""
// when there is none to write. Read after WorkerLogs::FinishAttempt, so
// the stderr tails are whole.
absl::StatusOr<std::string> WriteDiagnostics(const GroupResult& group,
                                             const WorkerLogs& files,
                                             int attempt, int nproc);

// The agent's part after an attempt: writes the file when `group` carries
// evidence, keeps the logs it sits beside, logs its path and tells the
// event log (with one line per worker). The path, "" when none was written.
std::string RecordDiagnostics(const GroupResult& group, WorkerLogs* files,
                              int attempt, int nproc, Observer* observer);

}  // namespace distjob

#endif  // DISTJOB_AGENT_DIAGNOSTICS_H_
