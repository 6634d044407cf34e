#include "spawn/fake_command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace distjob {
namespace {

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void SetNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Writes what `fd` takes of `data` without blocking; what was written.
std::string WriteSome(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // full (EAGAIN): a real process would block; this one stops
    }
  }
  return data.substr(0, off);
}

bool Ends(int sig) {
  return sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP ||
         sig == SIGQUIT;
}

}  // namespace

CommandStarter FakeCommand::Starter(FakeCommandScript script,
                                    FakeCommandLog* log) {
  return [script = std::move(script), log](
             const std::string& command,
             const EnvMap&) -> absl::StatusOr<std::unique_ptr<Command>> {
    std::unique_ptr<FakeCommand> c(new FakeCommand(script, log));
    if (absl::Status s = c->Open(); !s.ok()) return s;
    ++log->started;
    log->command = command;
    return std::unique_ptr<Command>(std::move(c));
  };
}

FakeCommand::FakeCommand(FakeCommandScript script, FakeCommandLog* log)
    : script_(std::move(script)), log_(log) {}

absl::Status FakeCommand::Open() {
  absl::MutexLock lock(&mu_);
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return absl::InternalError("pipe2 failed");
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    return absl::InternalError("pipe2 failed");
  }
  stdin_fd_ = in[1];
  stdin_far_ = in[0];
  stdout_fd_ = out[0];
  stdout_far_ = out[1];
  stderr_fd_ = err[0];
  stderr_far_ = err[1];
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_, stdin_far_, stdout_far_,
                 stderr_far_}) {
    SetNonBlocking(fd);
  }
  if (!script_.reads_stdin) CloseFd(&stdin_far_);
  log_->stdout_written = WriteSome(stdout_far_, script_.stdout_data);
  log_->stderr_written = WriteSome(stderr_far_, script_.stderr_data);
  if (script_.ends == FakeCommandScript::Ends::kAtOnce) End(script_.exit);
  return absl::OkStatus();
}

FakeCommand::~FakeCommand() {
  absl::MutexLock lock(&mu_);
  DrainStdin();
  for (int* fd : {&stdin_fd_, &stdout_fd_, &stderr_fd_, &stdin_far_,
                  &stdout_far_, &stderr_far_}) {
    CloseFd(fd);
  }
}

void FakeCommand::End(CommandExit how) const {
  if (log_->exit.has_value()) return;
  log_->exit = how;
  CloseFd(&stdout_far_);
  CloseFd(&stderr_far_);
}

void FakeCommand::DrainStdin() const {
  if (stdin_far_ < 0) return;
  char buf[4096];
  ssize_t n;
  while ((n = read(stdin_far_, buf, sizeof(buf))) > 0) {
    log_->stdin_received.append(buf, static_cast<size_t>(n));
  }
}

pid_t FakeCommand::pid() const { return -1; }  // no process

int FakeCommand::stdin_fd() const {
  absl::MutexLock lock(&mu_);
  return stdin_fd_;
}

int FakeCommand::stdout_fd() const {
  absl::MutexLock lock(&mu_);
  return stdout_fd_;
}

int FakeCommand::stderr_fd() const {
  absl::MutexLock lock(&mu_);
  return stderr_fd_;
}

void FakeCommand::CloseStdin() {
  absl::MutexLock lock(&mu_);
  // What was written so far is kept before its end goes (the pipe holds it).
  DrainStdin();
  CloseFd(&stdin_fd_);
  if (script_.ends == FakeCommandScript::Ends::kOnStdinClose) {
    End(script_.exit);
  }
}

void FakeCommand::CloseStdout() {
  absl::MutexLock lock(&mu_);
  CloseFd(&stdout_fd_);
}

void FakeCommand::CloseStderr() {
  absl::MutexLock lock(&mu_);
  CloseFd(&stderr_fd_);
}

absl::Status FakeCommand::Signal(int sig) const {
  if (sig <= 0 || sig >= NSIG) {
    return absl::InvalidArgumentError(absl::StrCat(
        "signal ", sig, " is not a signal number (1-", NSIG - 1, ")"));
  }
  absl::MutexLock lock(&mu_);
  log_->signals.push_back(sig);
  if (Ends(sig)) End(CommandExit{true, sig});
  return absl::OkStatus();
}

std::optional<CommandExit> FakeCommand::Poll() {
  absl::MutexLock lock(&mu_);
  return log_->exit;
}

CommandExit FakeCommand::EndGroup(absl::Duration) {
  absl::MutexLock lock(&mu_);
  ++log_->end_group_calls;
  End(CommandExit{true, SIGTERM});
  return *log_->exit;
}

}  // namespace distjob
