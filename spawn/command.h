// What one spawn call drives: a started command's three pipes, its signals
// and its end. The seam between the call's pump (spawn_call) and the
// processes it starts: the server starts SpawnedCommand (`/bin/sh -c`, a
// process group); the fuzz target and tests start FakeCommand, which runs
// nothing, so that the call's handling of what a caller sends is exercised
// fast and without forking.
#ifndef DISTJOB_SPAWN_COMMAND_H_
#define DISTJOB_SPAWN_COMMAND_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/environment.h"

namespace distjob {

// How the command ended: an exit status or the signal that killed it.
struct CommandExit {
  bool signaled = false;
  int code = 0;  // the exit status (0-255), or the signal number
};

class Command {
 public:
  virtual ~Command() = default;

  // The process (group) it runs as, for logs; -1 once ended and reaped.
  virtual pid_t pid() const = 0;
  // Our ends of its pipes, non-blocking; -1 once closed.
  virtual int stdin_fd() const = 0;
  virtual int stdout_fd() const = 0;
  virtual int stderr_fd() const = 0;
  virtual void CloseStdin() = 0;
  virtual void CloseStdout() = 0;
  virtual void CloseStderr() = 0;

  // `sig` to every process of the command; InvalidArgument for a number
  // that is not a signal.
  virtual absl::Status Signal(int sig) const = 0;
  // How it ended once it has, without waiting.
  virtual std::optional<CommandExit> Poll() = 0;
  // Ends it (SIGTERM, SIGKILL after `grace`) and says how it ended.
  virtual CommandExit EndGroup(absl::Duration grace) = 0;
};

// Starts `command` with `env`: what a call runs its first message with.
using CommandStarter = std::function<absl::StatusOr<std::unique_ptr<Command>>(
    const std::string& command, const EnvMap& env)>;

}  // namespace distjob

#endif  // DISTJOB_SPAWN_COMMAND_H_
