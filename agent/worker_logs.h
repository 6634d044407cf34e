// Per-attempt worker files in torchrun's layout:
//   <dir>/attempt_<n>/<local_rank>/error.json
// <dir> is --log-dir when given, else a private temporary directory that is
// removed when the agent exits (the error files are read before that).
#ifndef DISTJOB_AGENT_WORKER_LOGS_H_
#define DISTJOB_AGENT_WORKER_LOGS_H_

#include <string>

#include "absl/status/statusor.h"

namespace distjob {

class WorkerLogs {
 public:
  // An error only for an unusable --log-dir; without one, a temporary
  // directory that cannot be made gives a WorkerLogs with !enabled().
  static absl::StatusOr<WorkerLogs> Create(const std::string& log_dir);
  bool enabled() const { return !dir_.empty(); }
  WorkerLogs(WorkerLogs&& other) noexcept;
  WorkerLogs& operator=(WorkerLogs&&) = delete;
  ~WorkerLogs();

  // Creates attempt_<attempt>/<rank>/ for every local rank and removes a
  // stale error.json, so a file found later was written by this attempt.
  absl::Status PrepareAttempt(int attempt, int nproc) const;

  // These are "" when !enabled().
  std::string AttemptDir(int attempt, int local_rank) const;
  std::string ErrorFile(int attempt, int local_rank) const;
  // Given to the worker as DISTJOB_HEARTBEAT_FILE with --hang-timeout.
  std::string HeartbeatFile(int attempt, int local_rank) const;

 private:
  WorkerLogs(std::string dir, bool temporary)
      : dir_(std::move(dir)), temporary_(temporary) {}

  std::string dir_;
  bool temporary_ = false;
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_WORKER_LOGS_H_
