#include "agent/nested_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/logging.h"
#include "supervisor/process.h"

namespace distjob {

std::vector<std::string> OptionsBeforeCommand(
    const std::vector<std::string>& args, size_t command_words) {
  std::vector<std::string> options;
  const size_t end = args.size() - std::min(args.size(), command_words);
  for (size_t i = 0; i < end; ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    const bool long_option = a.size() > 2 && a[0] == '-' && a[1] == '-';
    const bool short_option = a.size() > 1 && a[0] == '-' &&
                              std::isalpha(static_cast<unsigned char>(a[1]));
    if (long_option || short_option) {
      options.push_back(a.substr(0, a.find('=')));
    }
  }
  return options;
}

int HandOverToLauncher(const std::vector<std::string>& command,
                       const std::vector<std::string>& dropped) {
  const std::string notice =
      "the command (" + command[0] +
      ") runs a torchrun launcher: handing over to it, so the job has one "
      "rendezvous and one set of workers";
  DJ_LOG_INFO("{}", notice);
  if (!dropped.empty()) {
    // A warning, not exit 2: an image's ENTRYPOINT may carry agent options
    // for jobs the agent launches itself, and here the inner launcher's
    // own command line (and the PET_* variables it reads) define the job.
    std::string names;
    for (const std::string& d : dropped) {
      names += (names.empty() ? "" : ", ") + d;
    }
    const std::string warning =
        "the agent's options are not passed on to the launcher it hands "
        "over to (it reads its own options and the PET_* variables): " +
        names + " dropped";
    DJ_LOG_WARNING("{}", warning);
  }
  const InheritedSignalState state = InheritedSignalState::Capture();
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    signal(sig, sigismember(&state.ignored, sig) ? SIG_IGN : SIG_DFL);
  }
  sigprocmask(SIG_SETMASK, &state.mask, nullptr);
  std::vector<char*> argv;
  for (const std::string& a : command)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  execvp(argv[0], argv.data());
  const int err = errno;
  std::fprintf(stderr, "distjob-agent run: cannot run %s: %s\n",
               command[0].c_str(), std::strerror(err));
  return ExecFailureExitCode(err);
}

}  // namespace distjob
