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
  // The interpreter: $PYTHON_EXEC when set, else python3 (from PATH).
  std::string python = "python3";
};

std::vector<std::string> WorkerArgv(const std::vector<std::string>& command,
                                    const WorkerCommandOptions& options,
                                    int local_rank);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_WORKER_COMMAND_H_
