// The argv each worker runs, from the user's command and torchrun's
// options: `script.py args` runs as `python3 -u script.py args`, `-m mod`
// as `python3 -u -m mod`, --no-python as given; ${local_rank} in arguments
// is replaced, as torchrun's macro substitution does.
#ifndef DISTJOB_LAUNCHERS_WORKER_COMMAND_H_
#define DISTJOB_LAUNCHERS_WORKER_COMMAND_H_

#include <string>
#include <vector>

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

// True when `command` is itself a torchrun launcher: `torchrun ...`,
// `distjob-agent ...`, `python -m torch.distributed.run|launch ...`, or a
// shell's `-c` script that runs one of these (`bash -c "torchrun ..."`).
bool IsLauncherCommand(const std::vector<std::string>& command);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_WORKER_COMMAND_H_
