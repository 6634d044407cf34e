// The argv each worker runs, from the user's command and torchrun's
// options: `script.py args` runs as `python3 -u script.py args`, `-m mod`
// as `python3 -u -m mod`, --no-python as given; ${local_rank} in arguments
// is replaced, as torchrun's macro substitution does.
#ifndef DISTJOB_LAUNCHERS_WORKER_COMMAND_H_
#define DISTJOB_LAUNCHERS_WORKER_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace distjob {

struct WorkerCommandOptions {
  bool module = false;
  bool no_python = false;
  // Invoked under the name torchrun: every script runs with Python, as
  // torchrun runs it, .py or not (`distjob-agent run` runs a command
  // without .py as it is).
  bool always_python = false;
  // The interpreter: $PYTHON_EXEC when set, else python3 (from PATH).
  std::string python = "python3";
};

std::vector<std::string> WorkerArgv(const std::vector<std::string>& command,
                                    const WorkerCommandOptions& options,
                                    int local_rank);

// A regular file this process may execute.
bool IsExecutableFile(const std::string& path);

// The absolute path `program` runs as: itself when it names a path (has a
// '/'), else the first `dir/program` along `path_var` (a PATH value) that
// `executable` accepts; "" when there is none.
std::string ResolveOnPath(const std::string& program,
                          absl::string_view path_var,
                          const std::function<bool(const std::string&)>&
                              executable = IsExecutableFile);

// A hint for a worker's error text (its error file's message or the last
// lines of its stderr): a Python without PyTorch ("No module named
// 'torch'") names `interpreter` and PYTHON_EXEC, which chooses another;
// "" when the error is no such thing. For the failure report.
std::string InterpreterHint(absl::string_view error_text,
                            const std::string& interpreter);

// True when `command` is itself a torchrun launcher: `torchrun ...`,
// `distjob-agent ...`, `python -m torch.distributed.run|launch ...`, or a
// shell's `-c` script that runs one of these (`bash -c "torchrun ..."`).
bool IsLauncherCommand(const std::vector<std::string>& command);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_WORKER_COMMAND_H_
