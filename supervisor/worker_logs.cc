#include "supervisor/worker_logs.h"

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/console_writer.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/text.h"
#include "supervisor/console_lines.h"

namespace distjob {
namespace {

constexpr size_t kCopyBufferSize = 1 << 20;
constexpr size_t kStderrTailBytes = 64 << 10;

absl::Status MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrCat("mkdir ", prefix));
    }
  }
  // mkdir's EEXIST also answers for a file or a FIFO of that name: the
  // workers' files would then fail one by one, with warnings, and the run
  // go on without them.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("stat ", path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(QuoteForMessage(path, PATH_MAX), ": ",
                     FileKind(st.st_mode), ", not a directory"));
  }
  return absl::OkStatus();
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path);
}

// Writes all of `data` to a log file; the errno of a failed write, else 0.
int WriteFile(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

// The lines of one stream that --duplicate-std{out,err}-filters select, as
// they complete, written with the console prefix to the policy's file. A
// line longer than kMaxConsoleLine is judged in pieces of that size, as
// the console shows it.
class DuplicateLines {
 public:
  explicit DuplicateLines(const LinePolicy& policy) : policy_(policy) {}

  void Feed(absl::string_view chunk) {
    if (policy_.duplicate_fd < 0 || policy_.duplicate_filters.empty()) return;
    while (!chunk.empty()) {
      const size_t room = kMaxConsoleLine - line_.size();
      const size_t end = chunk.substr(0, room).find('\n');
      if (end == absl::string_view::npos && chunk.size() < room) {
        line_.append(chunk.data(), chunk.size());
        return;
      }
      const size_t take = end == absl::string_view::npos ? room : end + 1;
      line_.append(chunk.data(), take);
      chunk.remove_prefix(take);
      Flush();
    }
  }

  void Finish() {
    if (!line_.empty()) Flush();
  }

 private:
  void Flush() {
    if (ShouldDuplicate(policy_, line_)) {
      std::string out = absl::StrCat(policy_.prefix, line_);
      if (out.back() != '\n') out += '\n';
      // The duplicate is a convenience: the line is in the main log and on
      // the console whatever happens to it.
      (void)WriteFile(policy_.duplicate_fd, out);
    }
    line_.clear();
  }

  const LinePolicy& policy_;
  std::string line_;
};

// One --tee stream: what the worker writes goes to `path` byte for byte
// and, a line at a time with the policy's prefix, to the console (unless
// the policy keeps this rank off it) and, for lines a duplicate filter
// selects, to the policy's duplicate file. Neither a full disk nor a
// console that nobody reads stops the copy (the worker would block on a
// full pipe); each is reported once.
void CopyStream(int in, int file, const std::string& path,
                ConsoleWriter* console, const LinePolicy& policy) {
  ConsoleLines lines(policy.prefix);
  if (!policy.json_fields.is_null()) lines.SetJsonFields(policy.json_fields);
  DuplicateLines duplicates(policy);
  std::string out;
  std::vector<char> buf(kCopyBufferSize);
  bool console_reported = false;
  auto to_console = [&]() {
    if (!policy.console) out.clear();
    if (out.empty()) return;
    const ConsoleWriter::Result r = console->Write(out);
    out.clear();
    if (r == ConsoleWriter::Result::kStalled && !console_reported) {
      console_reported = true;
      DJ_LOG_WARNING(
          "the console is not being read: lines copied from {} are dropped "
          "from it while it stays full (the file keeps them all)",
          path);
    }
  };
  for (;;) {
    const ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const absl::string_view chunk(buf.data(), static_cast<size_t>(n));
    if (file >= 0) {
      if (const int err = WriteFile(file, chunk); err != 0) {
        DJ_LOG_ERROR(
            "write {}: {}; the rest of this stream goes to the console only",
            path, std::strerror(err));
        close(file);
        file = -1;
      }
    }
    duplicates.Feed(chunk);
    lines.Feed(chunk, &out);
    to_console();
  }
  duplicates.Finish();
  lines.Finish(&out);
  to_console();
  close(in);
  if (file >= 0) close(file);
}

// A stderr that no --redirects/--tee routes: copied to the console as it
// comes (or dropped, for a rank --local-ranks-filter hides) while its last
// kStderrTailBytes are kept and, at its end, written to `path`: the
// traceback that says why a worker failed, for the restart policy and the
// root-cause report.
void CopyStderrTail(int in, const std::string& path, ConsoleWriter* console,
                    bool to_console) {
  std::string tail;
  std::vector<char> buf(kCopyBufferSize);
  bool console_reported = false;
  for (;;) {
    const ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const absl::string_view chunk(buf.data(), static_cast<size_t>(n));
    if (to_console &&
        console->Write(chunk) == ConsoleWriter::Result::kStalled &&
        !console_reported) {
      console_reported = true;
      DJ_LOG_WARNING(
          "the console is not being read: worker stderr is dropped from it "
          "while it stays full ({} keeps its end)",
          path);
    }
    tail.append(chunk.data(), chunk.size());
    if (tail.size() > 2 * kStderrTailBytes) {
      tail.erase(0, tail.size() - kStderrTailBytes);
    }
  }
  close(in);
  if (tail.size() > kStderrTailBytes) {
    tail.erase(0, tail.size() - kStderrTailBytes);
  }
  if (tail.empty()) return;
  // Non-blocking and refused unless a regular file: a worker may have put
  // a FIFO at this path, and the agent must not wait on it.
  absl::StatusOr<int> opened = OpenOutputFile("--log-dir", path, O_TRUNC);
  if (!opened.ok()) {
    DJ_LOG_WARNING("{}", opened.status().message());
    return;
  }
  const int file = *opened;
  if (const int err = WriteFile(file, tail); err != 0) {
    DJ_LOG_DEBUG("write {}: {}", path, std::strerror(err));
  }
  close(file);
}

// The last `limit` bytes of the regular file at `path`; "" when there is
// none (or it is not a regular file: a worker may have put anything there).
std::string ReadFileTail(const std::string& path, size_t limit) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string out;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const off_t size = st.st_size;
    const off_t start =
        size > static_cast<off_t>(limit) ? size - static_cast<off_t>(limit) : 0;
    out.resize(static_cast<size_t>(size - start));
    const ssize_t n = pread(fd, out.data(), out.size(), start);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  return out;
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
  if (((redirect | tee) & 2) == 0) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2 for stderr");
    if (streams.stderr_fd >= 0) {
      // Hidden from the console, still kept for the report.
      close(streams.stderr_fd);
      open_fds_.pop_back();
    }
    copiers_.emplace_back(
        CopyStderrTail, p[0],
        absl::StrCat(AttemptDir(attempt, local_rank), "/stderr_tail.log"),
        &ConsoleWriter::Stderr(), (plan.discard & 2) == 0);
    open_fds_.push_back(p[1]);
    streams.stderr_fd = p[1];
  }
  for (int bit : {1, 2}) {
    if (((redirect | tee) & bit) == 0) continue;
    const std::string path =
        absl::StrCat(AttemptDir(attempt, local_rank),
                     bit == 1 ? "/stdout.log" : "/stderr.log");
    // As every output file: a FIFO planted at the path fails at once.
    absl::StatusOr<int> opened = OpenOutputFile("--log-dir", path, O_TRUNC);
    if (!opened.ok()) return opened.status();
    const int file = *opened;
    // The worker may get this fd as its own stdout: blocking writes, as
    // any file it opens (a character device such as /dev/null is allowed).
    fcntl(file, F_SETFL, fcntl(file, F_GETFL) & ~O_NONBLOCK);
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
        absl::StatusOr<int> opened =
            OpenOutputFile("--log-dir", dup_path, O_TRUNC | O_APPEND);
        if (!opened.ok()) {
          close(file);
          close(p[0]);
          close(p[1]);
          return opened.status();
        }
        duplicate = *opened;
      }
      routed.duplicate_fd = duplicate;
      // A bigger pipe halves the copier's wake-ups; not fatal if refused.
      fcntl(p[1], F_SETPIPE_SZ, static_cast<int>(kCopyBufferSize));
      copiers_.emplace_back(
          CopyStream, p[0], file, path,
          bit == 1 ? &ConsoleWriter::Stdout() : &ConsoleWriter::Stderr(),
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
      keep_(other.keep_),
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
  if (temporary_ && !keep_) {
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

std::string WorkerLogs::StderrTail(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  const std::string dir = AttemptDir(attempt, local_rank);
  std::string tail = ReadFileTail(dir + "/stderr.log", kStderrTailBytes);
  if (tail.empty())
    tail = ReadFileTail(dir + "/stderr_tail.log", kStderrTailBytes);
  return tail;
}

std::string WorkerLogs::StderrFile(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  const std::string dir = AttemptDir(attempt, local_rank);
  struct stat st;
  if (stat((dir + "/stderr.log").c_str(), &st) == 0) return dir + "/stderr.log";
  if (stat((dir + "/stderr_tail.log").c_str(), &st) == 0) {
    return dir + "/stderr_tail.log";
  }
  return "";
}

std::string WorkerLogs::HeartbeatFile(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  return AttemptDir(attempt, local_rank) + "/heartbeat";
}

std::string WorkerLogs::ServerSocket(int attempt, int local_rank) const {
  if (dir_.empty()) return "";
  std::string path = AttemptDir(attempt, local_rank) + "/worker.sock";
  // sun_path holds 107 bytes and a NUL: a longer --log-dir gets no socket.
  return path.size() <= 107 ? path : "";
}

absl::Status WorkerLogs::PrepareAttempt(int attempt, int nproc) const {
  if (dir_.empty()) return absl::OkStatus();
  for (int rank = 0; rank < nproc; ++rank) {
    if (absl::Status made = MakeDirs(AttemptDir(attempt, rank)); !made.ok()) {
      return made;
    }
    unlink(ErrorFile(attempt, rank).c_str());
    unlink(HeartbeatFile(attempt, rank).c_str());
    const std::string socket = ServerSocket(attempt, rank);
    if (!socket.empty()) unlink(socket.c_str());
  }
  return absl::OkStatus();
}

}  // namespace distjob
