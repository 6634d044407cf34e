// Starting worker processes: fork + exec with the agent's inherited signal
// state restored, each worker leading its own process group so a signal to
// the group reaches every process the worker starts.
#ifndef DISTJOB_SUPERVISOR_PROCESS_H_
#define DISTJOB_SUPERVISOR_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/environment.h"
#include "supervisor/numa.h"

namespace distjob {

// The signal mask and ignored signals the agent was started with, captured
// before it blocks signals for its own event loop, so that workers start as
// if the agent had not been there.
struct InheritedSignalState {
  sigset_t mask;
  sigset_t ignored;

  // The state captured by BlockAsyncSignalsAtStartup() if it ran, else the
  // current one.
  static InheritedSignalState Capture();
};

// Every asynchronous signal the agent can catch: all but SIGKILL/SIGSTOP and
// the synchronous faults (SEGV, BUS, FPE, ILL, TRAP, SYS), which must stay
// unblocked or a bug would hang the agent instead of crashing it.
sigset_t AsyncSignals();

// Captures the inherited signal state, then blocks AsyncSignals(). Called
// first thing by `run`, so no signal is lost before the supervisor reads
// them from its signalfd.
void BlockAsyncSignalsAtStartup();

struct ProcessSpec {
  std::vector<std::string> argv;
  EnvMap env;
  // -1 keeps the agent's stdin/stdout/stderr.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // --numa-binding: CPU affinity and memory policy set before exec; empty
  // binds nothing.
  NumaBinding numa;
};

struct SpawnedProcess {
  pid_t pid = -1;
  // errno of a failed exec (ENOENT, EACCES, ...), 0 when exec succeeded.
  // The child has then already exited 127 (not found) or 126.
  int exec_errno = 0;
};

// Forks and execs `spec`. argv[0] is searched in the worker's PATH. An exec
// failure is not an error here: it is reported in `exec_errno` and by the
// child's exit code, as a shell would. Errors are fork/pipe failures.
absl::StatusOr<SpawnedProcess> SpawnProcess(const ProcessSpec& spec,
                                            const InheritedSignalState& state);

// 127 for "not found" errnos, 126 for the rest ("found but not runnable").
int ExecFailureExitCode(int exec_errno);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_PROCESS_H_
