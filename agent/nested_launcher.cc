#include "agent/nested_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/logging.h"
#include "supervisor/process.h"

namespace distjob {

int HandOverToLauncher(const std::vector<std::string>& command) {
  const std::string notice =
      "the command (" + command[0] +
      ") runs a torchrun launcher: handing over to it, so the job has one "
      "rendezvous and one set of workers";
  DJ_LOG_INFO("{}", notice);
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
