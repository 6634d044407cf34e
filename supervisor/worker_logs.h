// Per-attempt worker files in torchrun's layout:
//   <dir>/attempt_<n>/<local_rank>/error.json, stderr_tail.log, ...
// <dir> is --log-dir when given, else a private temporary directory that is
// removed when the agent exits (the error files are read before that),
// unless Keep() was called: a failed job's files are evidence.
#ifndef DISTJOB_SUPERVISOR_WORKER_LOGS_H_
#define DISTJOB_SUPERVISOR_WORKER_LOGS_H_

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "supervisor/line_policy.h"

namespace distjob {

// torchrun's --redirects/--tee value: "0".."3" for every rank, or
// "RANK:MASK,..." (1 = stdout, 2 = stderr, 3 = both); one mask per rank.
absl::StatusOr<std::vector<int>> ParseStreamMask(const std::string& text,
                                                 int nproc);

struct WorkerStreams {
  int stdout_fd = -1;  // -1: the agent's own
  int stderr_fd = -1;
};

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

  // Files for the streams in `plan.redirect` (bits 1 = stdout, 2 =
  // stderr), or for those in `plan.tee` also routed line by line as
  // `stdout_policy` / `stderr_policy` say (console prefix, duplicates into
  // attempt_<n>/filtered_std{out,err}.log when they have filters):
  // attempt_<n>/<rank>/stdout.log|stderr.log. Streams in `plan.discard` go
  // to /dev/null, with or without a log directory. A stderr neither
  // redirected nor tee'd still goes through the agent (with a log
  // directory): to the console byte for byte (not when discarded), its last
  // 64 KiB kept in attempt_<n>/<rank>/stderr_tail.log (StderrTail). The
  // fds are the agent's until FinishAttempt.
  absl::StatusOr<WorkerStreams> OpenStreams(int attempt, int local_rank,
                                            const StreamPlan& plan,
                                            const LinePolicy& stdout_policy,
                                            const LinePolicy& stderr_policy);
  // Closes the agent's copies of the stream fds and waits for the tee
  // copiers to reach end of file (every writer of the attempt is gone).
  // These are "" when !enabled().
  void FinishAttempt();

  // The last 64 KiB of a worker's stderr in attempt `attempt` (its
  // stderr.log under --redirects/--tee, else what the agent kept of it),
  // "" when none was kept. Read after FinishAttempt.
  std::string StderrTail(int attempt, int local_rank) const;
  // The file StderrTail reads, "" when there is none.
  std::string StderrFile(int attempt, int local_rank) const;
  // The directory stays when the agent exits, though it is temporary: a
  // failed job's files are evidence.
  void Keep() { keep_ = true; }
  const std::string& dir() const { return dir_; }

  std::string AttemptDir(int attempt, int local_rank) const;
  std::string ErrorFile(int attempt, int local_rank) const;
  // Given to the worker as DISTJOB_HEARTBEAT_FILE with --hang-timeout.
  std::string HeartbeatFile(int attempt, int local_rank) const;
  // Given to the worker as TORCH_WORKER_SERVER_SOCKET, where torch >= 2.4
  // serves its control plane (worker_main()); "" when the path would be
  // too long for a Unix socket.
  std::string ServerSocket(int attempt, int local_rank) const;

 private:
  WorkerLogs(std::string dir, bool temporary)
      : dir_(std::move(dir)), temporary_(temporary) {}

  std::string dir_;
  bool temporary_ = false;
  bool keep_ = false;
  std::vector<int> open_fds_;
  // attempt_<n>/filtered_stdout.log and filtered_stderr.log, shared by the
  // attempt's copiers (O_APPEND, one write per line); -1 until needed.
  int duplicate_fds_[2] = {-1, -1};
  std::vector<std::thread> copiers_;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_WORKER_LOGS_H_
