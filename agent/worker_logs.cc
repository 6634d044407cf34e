#include "agent/worker_logs.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace distjob {
namespace {

absl::Status MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("mkdir ", prefix));
    }
  }
  return absl::OkStatus();
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path);
}

}  // namespace

absl::StatusOr<WorkerLogs> WorkerLogs::Create(const std::string& log_dir) {
  if (!log_dir.empty()) {
    if (absl::Status made = MakeDirs(log_dir); !made.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--log-dir: ", made.message()));
    }
    return WorkerLogs(log_dir, false);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/distjob-agent-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    // An image without a writable /tmp still runs its job, without error
    // files and heartbeats.
    return WorkerLogs("", false);
  }
  return WorkerLogs(templ, true);
}

WorkerLogs::WorkerLogs(WorkerLogs&& other) noexcept
    : dir_(std::move(other.dir_)), temporary_(other.temporary_) {
  other.temporary_ = false;
}

WorkerLogs::~WorkerLogs() {
  if (temporary_) {
    nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  }
}

std::string WorkerLogs::AttemptDir(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  return absl::StrCat(dir_, "/attempt_", attempt, "/", local_rank);
}

std::string WorkerLogs::ErrorFile(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  return AttemptDir(attempt, local_rank) + "/error.json";
}

std::string WorkerLogs::HeartbeatFile(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  return AttemptDir(attempt, local_rank) + "/heartbeat";
}

absl::Status WorkerLogs::PrepareAttempt(int attempt, int nproc) const {
  if (dir_.empty()) return absl::OkStatus();
  for (int rank = 0; rank < nproc; ++rank) {
    if (absl::Status made = MakeDirs(AttemptDir(attempt, rank)); !made.ok()) {
      return made;
    }
    unlink(ErrorFile(attempt, rank).c_str());
    unlink(HeartbeatFile(attempt, rank).c_str());
  }
  return absl::OkStatus();
}

}  // namespace distjob
