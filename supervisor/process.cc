#include "supervisor/process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"

namespace distjob {
namespace {

// Mirrors execvpe's search, but against the worker's own PATH rather than
// the agent's, and without allocating after fork.
std::string ResolveExecutable(const std::string& file, const EnvMap& env) {
  if (file.find('/') != std::string::npos) return file;
  std::string path =
      Lookup(env, "PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  std::string first_found;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", file);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (first_found.empty() && access(candidate.c_str(), F_OK) == 0) {
      first_found = candidate;  // exists but not executable: EACCES later
    }
  }
  return first_found.empty() ? file : first_found;
}

}  // namespace

namespace {

bool g_captured_at_startup = false;
InheritedSignalState g_startup_state;

InheritedSignalState CaptureNow() {
  InheritedSignalState state;
  sigprocmask(SIG_SETMASK, nullptr, &state.mask);
  sigemptyset(&state.ignored);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action;
    if (sigaction(sig, nullptr, &action) == 0 && action.sa_handler == SIG_IGN) {
      sigaddset(&state.ignored, sig);
    }
  }
  return state;
}

}  // namespace

InheritedSignalState InheritedSignalState::Capture() {
  return g_captured_at_startup ? g_startup_state : CaptureNow();
}

sigset_t AsyncSignals() {
  sigset_t set;
  sigfillset(&set);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) {
    sigdelset(&set, sig);
  }
  return set;
}

void BlockAsyncSignalsAtStartup() {
  g_startup_state = CaptureNow();
  g_captured_at_startup = true;
  const sigset_t set = AsyncSignals();
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

int ExecFailureExitCode(int exec_errno) {
  return (exec_errno == ENOENT || exec_errno == ENOTDIR) ? 127 : 126;
}

absl::StatusOr<SpawnedProcess> SpawnProcess(const ProcessSpec& spec,
                                            const InheritedSignalState& state) {
  if (spec.argv.empty()) {
    return absl::InvalidArgumentError("empty worker command");
  }
  // Everything the child needs is built before fork: after fork in a
  // threaded process only async-signal-safe calls are allowed.
  const std::string executable = ResolveExecutable(spec.argv[0], spec.env);
  std::vector<char*> argv;
  for (const std::string& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env_strings = EnvToStrings(spec.env);
  std::vector<char*> envp;
  for (const std::string& e : env_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // The exec-status pipe: closed on a successful exec, or carrying errno.
  int pipe_fds[2];
  const pid_t parent = getpid();
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return ErrnoError(errno, "pipe2 for the exec-status pipe");
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return ErrnoError(err, absl::StrCat("fork for ", spec.argv[0]));
  }
  if (pid == 0) {
    close(pipe_fds[0]);
    setpgid(0, 0);
    // If the agent dies without stopping us (kill -9 of a non-PID-1 agent),
    // the worker must not train on unsupervised. The getppid check closes
    // the race with an agent that died before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(128 + SIGKILL);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig == SIGKILL || sig == SIGSTOP) continue;
      signal(sig, sigismember(&state.ignored, sig) ? SIG_IGN : SIG_DFL);
    }
    sigprocmask(SIG_SETMASK, &state.mask, nullptr);
    // Best effort, as numactl: a node that refuses a binding still runs.
    (void)ApplyNumaBinding(spec.numa);
    if (spec.stdin_fd >= 0) dup2(spec.stdin_fd, STDIN_FILENO);
    if (spec.stdout_fd >= 0) dup2(spec.stdout_fd, STDOUT_FILENO);
    if (spec.stderr_fd >= 0) dup2(spec.stderr_fd, STDERR_FILENO);
    execve(executable.c_str(), argv.data(), envp.data());
    const int err = errno;
    // Should it fail, the exit code below still says exec failed, and why.
    (void)!write(pipe_fds[1], &err, sizeof(err));
    _exit(ExecFailureExitCode(err));
  }
  // Also set from the parent, so the group exists before we signal it.
  setpgid(pid, pid);
  close(pipe_fds[1]);
  SpawnedProcess spawned;
  spawned.pid = pid;
  int err = 0;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n == sizeof(err)) spawned.exec_errno = err;
  return spawned;
}

}  // namespace distjob
