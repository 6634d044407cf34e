#include "launchers/worker_command.h"

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"

namespace distjob {

std::vector<std::string> WorkerArgv(const std::vector<std::string>& command,
                                    const WorkerCommandOptions& options,
                                    int local_rank) {
  std::vector<std::string> argv;
  if (command.empty()) return argv;
  const bool python_script =
      !options.no_python &&
      (options.module || absl::EndsWith(command[0], ".py"));
  if (python_script) {
    argv = {options.python, "-u"};
    if (options.module) argv.push_back("-m");
  }
  const std::string rank = std::to_string(local_rank);
  for (const std::string& arg : command) {
    argv.push_back(absl::StrReplaceAll(arg, {{"${local_rank}", rank}}));
  }
  return argv;
}

}  // namespace distjob
