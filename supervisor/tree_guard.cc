#include "supervisor/tree_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/errno_status.h"

namespace distjob {
namespace {

// The guard's whole life; only async-signal-safe calls, as it is forked
// from a process that may have threads.
[[noreturn]] void RunGuard(int in) {
  // Keep nothing of the agent's open: a console pipe held here would keep
  // its reader waiting after the agent is gone.
  for (int fd = 0; fd < 1024; ++fd) {
    if (fd != in) close(fd);
  }
  // The agent's stop signals are not for the guard; SIGKILL still is.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);
  static pid_t groups[4096];
  size_t count = 0;
  pid_t value;
  for (;;) {
    const ssize_t n = read(in, &value, sizeof(value));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(value))) break;  // the agent is gone
    if (value == 0) {
      count = 0;
    } else if (count < sizeof(groups) / sizeof(groups[0])) {
      groups[count++] = value;
    }
  }
  for (size_t i = 0; i < count; ++i) killpg(groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TreeGuard>> TreeGuard::Start() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2 for the guard");
  const pid_t middle = fork();
  if (middle < 0) {
    const int err = errno;
    close(p[0]);
    close(p[1]);
    return ErrnoError(err, "fork for the guard");
  }
  if (middle == 0) {
    // The middle process exits at once, so the guard is re-parented away
    // from the agent; its own session keeps it out of the agent's groups.
    setsid();
    close(p[1]);
    if (fork() == 0) RunGuard(p[0]);
    _exit(0);
  }
  close(p[0]);
  int status;
  while (waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  return std::unique_ptr<TreeGuard>(new TreeGuard(p[1]));
}

TreeGuard::~TreeGuard() { close(fd_); }

void TreeGuard::Send(pid_t value) {
  // A dead guard only costs its protection: its EPIPE is ignored (and the
  // agent never forwards its own SIGPIPE).
  ssize_t n;
  do {
    n = write(fd_, &value, sizeof(value));
  } while (n < 0 && errno == EINTR);
}

void TreeGuard::Add(pid_t process_group) {
  if (process_group > 0) Send(process_group);
}

void TreeGuard::Clear() { Send(0); }

}  // namespace distjob
