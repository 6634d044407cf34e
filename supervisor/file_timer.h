// The server side of torch's FileTimer: the FIFO workers write their timer
// requests to (TORCHELASTIC_TIMER_FILE), read by the supervisor's own
// epoll loop, never by a thread of its own. The FIFO is opened O_RDWR |
// O_NONBLOCK: the open never waits for a writer, a read never blocks, and
// the agent's own write end means a reader never sees EOF when the last
// worker closes its end (so the fd never turns readable for nothing).
#ifndef DISTJOB_SUPERVISOR_FILE_TIMER_H_
#define DISTJOB_SUPERVISOR_FILE_TIMER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/log_rate_limiter.h"
#include "supervisor/timer_table.h"

namespace distjob {

class FileTimerServer {
 public:
  // Creates the FIFO at `path` (removing what is there first, as torchrun
  // does) and opens it. Errors name the path.
  static absl::StatusOr<std::unique_ptr<FileTimerServer>> Create(
      const std::string& path, TimerLimits limits = {});
  ~FileTimerServer();  // closes and removes the FIFO

  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // Reads every byte waiting in the FIFO and applies each complete line to
  // the table; a malformed or oversized line is refused with a warning
  // (at most one a second, with a count of the rest).
  void ReadAvailable(absl::Time now);

  TimerTable& table() { return table_; }
  // When the last valid request arrived; InfinitePast if none did.
  // Thread-safe: the health endpoint reads it from its own thread.
  absl::Time last_request() const {
    const int64_t ns = last_request_ns_.load(std::memory_order_relaxed);
    return ns == kNever ? absl::InfinitePast() : absl::FromUnixNanos(ns);
  }

 private:
  FileTimerServer(std::string path, int fd, TimerLimits limits);
  void HandleLine(absl::string_view line, absl::Time now);

  const std::string path_;
  int fd_;
  TimerTable table_;
  std::string partial_;      // a line whose newline has not come yet
  bool discarding_ = false;  // the rest of an oversized line is skipped
  static constexpr int64_t kNever = INT64_MIN;
  std::atomic<int64_t> last_request_ns_{kNever};
  RateLimitedWarnings warnings_{"FileTimer"};
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_FILE_TIMER_H_
