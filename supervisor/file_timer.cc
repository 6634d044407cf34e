#include "supervisor/file_timer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "common/text.h"

namespace distjob {

absl::StatusOr<std::unique_ptr<FileTimerServer>> FileTimerServer::Create(
    const std::string& path, TimerLimits limits) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("FileTimer: unlink ", path));
  }
  // Only the workers' user may write timers that make the agent signal.
  if (mkfifo(path.c_str(), 0600) != 0) {
    return ErrnoError(errno, absl::StrCat("FileTimer: mkfifo ", path));
  }
  const int fd = open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    unlink(path.c_str());
    return ErrnoError(err, absl::StrCat("FileTimer: open ", path));
  }
  return std::unique_ptr<FileTimerServer>(
      new FileTimerServer(path, fd, limits));
}

FileTimerServer::FileTimerServer(std::string path, int fd, TimerLimits limits)
    : path_(std::move(path)), fd_(fd), table_(limits) {}

FileTimerServer::~FileTimerServer() {
  close(fd_);
  unlink(path_.c_str());
}

void FileTimerServer::ReadAvailable(absl::Time now) {
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd_, buf, sizeof(buf));
    if (n <= 0) break;  // EAGAIN: drained (never EOF: we hold a write end)
    absl::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      const size_t nl = chunk.find('\n');
      const absl::string_view piece = chunk.substr(0, nl);
      if (!discarding_) partial_.append(piece.data(), piece.size());
      if (partial_.size() > kMaxTimerRequestBytes && !discarding_) {
        warnings_.Warn("oversized",
                       absl::StrCat("request over ", kMaxTimerRequestBytes,
                                    " bytes refused"));
        partial_.clear();
        discarding_ = true;
      }
      if (nl == absl::string_view::npos) break;
      if (!discarding_) HandleLine(partial_, now);
      partial_.clear();
      discarding_ = false;
      chunk.remove_prefix(nl + 1);
    }
  }
  warnings_.TellOverdue();
}

void FileTimerServer::HandleLine(absl::string_view line, absl::Time now) {
  if (line.empty()) return;
  auto request = ParseTimerRequest(line);
  if (!request.ok()) {
    warnings_.Warn("malformed", absl::StrCat(request.status().message(), ": ",
                                             QuoteForMessage(line)));
    return;
  }
  switch (table_.Apply(*request)) {
    case TimerTable::Outcome::kPidFull:
    case TimerTable::Outcome::kTableFull:
      warnings_.Warn(
          "full",
          absl::StrCat("too many timers held; pid ", request->pid, " scope ",
                       QuoteForMessage(request->scope_id), " refused"));
      return;
    default:
      break;
  }
  last_request_ns_.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
  DJ_LOG_DEBUG("FileTimer: pid {} scope {} {}", request->pid,
               QuoteForMessage(request->scope_id),
               request->release ? "released" : "set");
}

}  // namespace distjob
