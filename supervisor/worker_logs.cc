#include "supervisor/worker_logs.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// Copies lines from `in` to `file` and routes each as `policy` says.
void CopyLines(int in, int file, int console, LinePolicy policy) {
  std::string pending;
  char buf[65536];
  auto flush_line = [&](absl::string_view line) {
    (void)!write(file, line.data(), line.size());
    const bool duplicate = ShouldDuplicate(policy, line);
    if (!policy.console && !duplicate) return;
    const std::string out = absl::StrCat(policy.prefix, line);
    if (policy.console) (void)!write(console, out.data(), out.size());
    if (duplicate) (void)!write(policy.duplicate_fd, out.data(), out.size());
  };
  for (;;) {
    const ssize_t n = read(in, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = pending.find('\n', start)) != std::string::npos) {
      flush_line(absl::string_view(pending).substr(start, nl + 1 - start));
      start = nl + 1;
    }
    pending.erase(0, start);
  }
  if (!pending.empty()) flush_line(pending + "\n");
  close(in);
  close(file);
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseStreamMask(const std::string& text,
                                                 int nproc) {
  auto bad = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not 0, 1, 2, 3 or RANK:MASK[,RANK:MASK...]"));
  };
  int all = 0;
  if (absl::SimpleAtoi(text, &all)) {
    if (all < 0 || all > 3) return bad();
    return std::vector<int>(static_cast<size_t>(nproc), all);
  }
  std::vector<int> masks(static_cast<size_t>(nproc), 0);
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    int rank = 0, mask = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &rank) ||
        !absl::SimpleAtoi(kv[1], &mask) || mask < 0 || mask > 3 || rank < 0) {
      return bad();
    }
    if (rank < nproc) masks[static_cast<size_t>(rank)] = mask;
  }
  return masks;
}

absl::StatusOr<WorkerStreams> WorkerLogs::OpenStreams(
    int attempt, int local_rank, const StreamPlan& plan,
    const LinePolicy& stdout_policy, const LinePolicy& stderr_policy) {
  WorkerStreams streams;
  for (int bit : {1, 2}) {
    if ((plan.discard & bit) == 0) continue;
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0) return ErrnoError(errno, "open /dev/null");
    open_fds_.push_back(null);
    (bit == 1 ? streams.stdout_fd : streams.stderr_fd) = null;
  }
  if (dir_.empty()) return streams;
  const int redirect = plan.redirect;
  const int tee = plan.tee;
  for (int bit : {1, 2}) {
    if (((redirect | tee) & bit) == 0) continue;
    const std::string path =
        absl::StrCat(AttemptDir(attempt, local_rank),
                     bit == 1 ? "/stdout.log" : "/stderr.log");
    const int file =
        open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file < 0) return ErrnoError(errno, absl::StrCat("open ", path));
    int fd = file;
    if (tee & bit) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        const int err = errno;
        close(file);
        return ErrnoError(err, "pipe2 for --tee");
      }
      const LinePolicy& policy = bit == 1 ? stdout_policy : stderr_policy;
      LinePolicy routed = policy;
      int& duplicate = duplicate_fds_[bit - 1];
      if (!policy.duplicate_filters.empty() && duplicate < 0) {
        const std::string dup_path = absl::StrCat(
            dir_, "/attempt_", attempt,
            bit == 1 ? "/filtered_stdout.log" : "/filtered_stderr.log");
        duplicate =
            open(dup_path.c_str(),
                 O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (duplicate < 0) {
          const int err = errno;
          close(file);
          close(p[0]);
          close(p[1]);
          return ErrnoError(err, absl::StrCat("open ", dup_path));
        }
      }
      routed.duplicate_fd = duplicate;
      copiers_.emplace_back(CopyLines, p[0], file,
                            bit == 1 ? STDOUT_FILENO : STDERR_FILENO,
                            std::move(routed));
      fd = p[1];
    }
    open_fds_.push_back(fd);
    (bit == 1 ? streams.stdout_fd : streams.stderr_fd) = fd;
  }
  return streams;
}

void WorkerLogs::FinishAttempt() {
  for (int fd : open_fds_) close(fd);
  open_fds_.clear();
  for (std::thread& t : copiers_) t.join();
  copiers_.clear();
  for (int& fd : duplicate_fds_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

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
    : dir_(std::move(other.dir_)),
      temporary_(other.temporary_),
      open_fds_(std::move(other.open_fds_)),
      copiers_(std::move(other.copiers_)) {
  for (int i : {0, 1}) {
    duplicate_fds_[i] = other.duplicate_fds_[i];
    other.duplicate_fds_[i] = -1;
  }
  other.temporary_ = false;
}

WorkerLogs::~WorkerLogs() {
  FinishAttempt();
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
