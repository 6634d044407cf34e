#include "common/console_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace distjob {

ConsoleWriter& ConsoleWriter::Stdout() {
  static ConsoleWriter* writer =
      new ConsoleWriter(STDOUT_FILENO, kConsoleStallLimit);
  return *writer;
}

ConsoleWriter& ConsoleWriter::Stderr() {
  static ConsoleWriter* writer =
      new ConsoleWriter(STDERR_FILENO, kConsoleStallLimit);
  return *writer;
}

ConsoleWriter::ConsoleWriter(int fd, absl::Duration stall_limit)
    : fd_(fd), stall_limit_(stall_limit) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    gone_ = true;
    return;
  }
  socket_ = S_ISSOCK(st.st_mode);
  fifo_ = S_ISFIFO(st.st_mode);
  if (fifo_) {
    // O_NONBLOCK on the inherited fd would change the file description the
    // workers share; reopening the FIFO gives the agent a description of
    // its own. Without /proc, writes wait in poll() and go PIPE_BUF at a
    // time, which a pipe with room takes without blocking.
    nonblocking_fd_ = open(absl::StrCat("/proc/self/fd/", fd).c_str(),
                           O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    // A 64 KiB console pipe costs a wake-up of the reader and of the
    // writer per 64 KiB; a bigger one lets --tee keep up with fast workers.
    // Best effort: the kernel caps it (fs.pipe-max-size).
    if (nonblocking_fd_ >= 0) fcntl(nonblocking_fd_, F_SETPIPE_SZ, 1 << 20);
  }
}

ConsoleWriter::~ConsoleWriter() {
  if (nonblocking_fd_ >= 0) close(nonblocking_fd_);
}

long ConsoleWriter::WriteSome(const char* data, size_t size) {
  ssize_t n;
  if (socket_) {
    n = send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else if (nonblocking_fd_ >= 0) {
    n = write(nonblocking_fd_, data, size);
  } else if (fifo_) {
    // A blocking FIFO: wait until it has room, then write no more than a
    // pipe takes at once when it has room.
    pollfd p{fd_, POLLOUT, 0};
    const int ready = poll(&p, 1, 0);
    if (ready == 0) return -EAGAIN;
    if (ready < 0) return -errno;
    n = write(fd_, data, std::min<size_t>(size, PIPE_BUF));
  } else {
    n = write(fd_, data, size);  // a file or a terminal
  }
  return n < 0 ? -errno : n;
}

ConsoleWriter::Result ConsoleWriter::Write(absl::string_view data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (gone_) return Result::kGone;
  size_t done = 0;
  absl::Time deadline =
      stalled_ ? absl::InfinitePast() : absl::Now() + stall_limit_;
  while (done < data.size()) {
    const long n = WriteSome(data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      stalled_ = false;
      deadline = absl::Now() + stall_limit_;
      continue;
    }
    if (n == -EINTR) continue;
    if (n != -EAGAIN && n != -EWOULDBLOCK) {
      gone_ = true;  // EPIPE, or an fd that cannot be written at all
      return Result::kGone;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      stalled_ = true;
      return Result::kStalled;
    }
    pollfd p{nonblocking_fd_ >= 0 ? nonblocking_fd_ : fd_, POLLOUT, 0};
    poll(&p, 1,
         static_cast<int>(absl::ToInt64Milliseconds(
             absl::Ceil(left, absl::Milliseconds(1)))));
  }
  return Result::kWritten;
}

}  // namespace distjob
