#include "spawn/spawned_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errno_status.h"
#include "supervisor/process.h"

namespace distjob {
namespace {

constexpr absl::Duration kDestructorGrace = absl::Seconds(2);
constexpr absl::Duration kGroupPoll = absl::Milliseconds(10);

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

CommandExit FromWaitStatus(int status) {
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

// The shells not yet reaped by their SpawnedCommand: the children
// ReapOrphans leaves alone. A shell is added under the lock held across
// its fork, so no reap can see it ended before it is known, and removed
// only once its owner has reaped it.
ABSL_CONST_INIT absl::Mutex shells_mu(absl::kConstInit);
absl::flat_hash_set<pid_t>& Shells() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shells_mu) {
  static auto* shells = new absl::flat_hash_set<pid_t>();
  return *shells;
}

// Reaps the shell `pid` and forgets it in one step under shells_mu: its
// pid is free for the kernel to reuse only once reaped, so a shell the
// next spawn starts under the same pid is never the one erased. `wait`:
// first wait (without reaping, so without the lock) until it has ended.
// Its wait status, or nullopt while it runs.
std::optional<int> ReapShell(pid_t pid, bool wait) {
  if (wait) {
    siginfo_t info{};
    while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) <
               0 &&
           errno == EINTR) {
    }
  }
  absl::MutexLock lock(&shells_mu);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid) return std::nullopt;
  Shells().erase(pid);
  return status;
}

}  // namespace

int SpawnedCommand::ReapOrphans() {
  absl::MutexLock lock(&shells_mu);
  int reaped = 0;
  for (;;) {
    siginfo_t info{};
    // A look without reaping (WNOWAIT): only a child that is no shell is
    // then taken. A shell that ended first hides the others until its
    // owner reaps it (its pump polls every few milliseconds).
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) break;
    if (info.si_pid == 0 || Shells().contains(info.si_pid)) break;
    int status = 0;
    if (waitpid(info.si_pid, &status, WNOHANG) != info.si_pid) break;
    ++reaped;
  }
  return reaped;
}

absl::StatusOr<std::unique_ptr<SpawnedCommand>> SpawnedCommand::Start(
    const std::string& command, const EnvMap& env) {
  // [0] read end, [1] write end; all close-on-exec: the child gets its
  // ends through dup2 only, so no other spawn's pipes leak into it.
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return ErrnoError(errno, "pipe2 for stdin");
  if (pipe2(out, O_CLOEXEC) != 0) {
    const int e = errno;
    close(in[0]);
    close(in[1]);
    return ErrnoError(e, "pipe2 for stdout");
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    return ErrnoError(e, "pipe2 for stderr");
  }
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", command};
  spec.env = env;
  spec.stdin_fd = in[0];
  spec.stdout_fd = out[1];
  spec.stderr_fd = err[1];
  absl::StatusOr<SpawnedProcess> spawned;
  {
    absl::MutexLock lock(&shells_mu);
    spawned = SpawnProcess(spec, InheritedSignalState::Capture());
    if (spawned.ok()) Shells().insert(spawned->pid);
  }
  for (int fd : {in[0], out[1], err[1]}) close(fd);
  if (!spawned.ok()) {
    for (int fd : {in[1], out[0], err[0]}) close(fd);
    return spawned.status();
  }
  std::unique_ptr<SpawnedCommand> c(new SpawnedCommand());
  c->pid_ = spawned->pid;
  c->stdin_fd_ = in[1];
  c->stdout_fd_ = out[0];
  c->stderr_fd_ = err[0];
  // Our ends never block a pump: a full stdin pipe or an empty output
  // pipe is waited for with poll.
  for (int fd : {c->stdin_fd_, c->stdout_fd_, c->stderr_fd_}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return c;
}

absl::StatusOr<std::unique_ptr<Command>> SpawnedCommand::StartCommand(
    const std::string& command, const EnvMap& env) {
  auto started = Start(command, env);
  if (!started.ok()) return started.status();
  return std::unique_ptr<Command>(*std::move(started));
}

SpawnedCommand::~SpawnedCommand() {
  if (pid_ > 0) EndGroup(kDestructorGrace);
  CloseStdin();
  CloseStdout();
  CloseStderr();
}

void SpawnedCommand::CloseStdin() { CloseFd(&stdin_fd_); }
void SpawnedCommand::CloseStdout() { CloseFd(&stdout_fd_); }
void SpawnedCommand::CloseStderr() { CloseFd(&stderr_fd_); }

absl::Status SpawnedCommand::Signal(int sig) const {
  if (sig <= 0 || sig >= NSIG) {
    return absl::InvalidArgumentError(absl::StrCat(
        "signal ", sig, " is not a signal number (1-", NSIG - 1, ")"));
  }
  if (pid_ <= 0) return absl::OkStatus();  // ended and reaped: no group
  if (kill(-pid_, sig) != 0 && errno != ESRCH) {
    return ErrnoError(errno, absl::StrCat("kill of process group ", pid_));
  }
  return absl::OkStatus();
}

std::optional<CommandExit> SpawnedCommand::Poll() {
  if (exit_.has_value() || pid_ <= 0) return exit_;
  if (std::optional<int> status = ReapShell(pid_, /*wait=*/false)) {
    exit_ = FromWaitStatus(*status);
  }
  return exit_;
}

bool SpawnedCommand::GroupGone() const {
  return kill(-pid_, 0) != 0 && errno == ESRCH;
}

CommandExit SpawnedCommand::EndGroup(absl::Duration grace) {
  if (pid_ <= 0) return exit_.value_or(CommandExit{});
  (void)Signal(SIGTERM);  // a group already gone is what is wanted
  const absl::Time deadline = absl::Now() + grace;
  // The shell is reaped first: its zombie would keep the group alive.
  while (absl::Now() < deadline) {
    Poll();
    // What the group's processes left ended as zombies of ours: until
    // reaped they keep the group alive.
    ReapOrphans();
    if (exit_.has_value() && GroupGone()) break;
    absl::SleepFor(kGroupPoll);
  }
  if (!exit_.has_value() || !GroupGone()) {
    (void)Signal(SIGKILL);  // as above
    if (!exit_.has_value()) {
      // A status lost (someone else reaped it) reads as the SIGKILL just
      // sent, never as success.
      exit_ = FromWaitStatus(ReapShell(pid_, /*wait=*/true).value_or(SIGKILL));
    }
  }
  const CommandExit result = *exit_;
  pid_ = -1;
  return result;
}

}  // namespace distjob
