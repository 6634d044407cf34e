// One command a spawn call runs: `/bin/sh -c COMMAND` (ssh's semantics)
// leading its own process group, with its stdin, stdout and stderr on pipes
// the spawn server pumps. The group, not only the shell, is what a signal
// or the end of the call reaches: MPI's daemons (orted, prted, Hydra's
// pmi_proxy) and the ranks they start live in it.
#ifndef DISTJOB_SPAWN_SPAWNED_COMMAND_H_
#define DISTJOB_SPAWN_SPAWNED_COMMAND_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/environment.h"
#include "spawn/command.h"

namespace distjob {

// The real Command (spawn/command.h): what the spawn server starts.
class SpawnedCommand final : public Command {
 public:
  // Starts `/bin/sh -c command` with `env`, the agent's inherited signal
  // state, and pipes for its three streams (non-blocking on our side).
  static absl::StatusOr<std::unique_ptr<SpawnedCommand>> Start(
      const std::string& command, const EnvMap& env);
  // Start, as a CommandStarter gives it to a call.
  static absl::StatusOr<std::unique_ptr<Command>> StartCommand(
      const std::string& command, const EnvMap& env);
  // Ends the group (EndGroup with a short grace) if it still runs.
  ~SpawnedCommand() override;
  SpawnedCommand(const SpawnedCommand&) = delete;
  SpawnedCommand& operator=(const SpawnedCommand&) = delete;

  pid_t pid() const override { return pid_; }
  // Our ends of the pipes; -1 once closed.
  int stdin_fd() const override { return stdin_fd_; }
  int stdout_fd() const override { return stdout_fd_; }
  int stderr_fd() const override { return stderr_fd_; }
  void CloseStdin() override;
  void CloseStdout() override;
  void CloseStderr() override;

  // `sig` to every process of the group; InvalidArgument for a number that
  // is not a signal.
  absl::Status Signal(int sig) const override;
  // The shell's end once it has exited (reaped here), without waiting.
  std::optional<CommandExit> Poll() override;
  // SIGTERM to the group, then SIGKILL to what is left after `grace`; the
  // shell reaped. Returns how the shell ended (what it had already ended
  // with when it was gone before). Bounded by `grace` plus a SIGKILL.
  CommandExit EndGroup(absl::Duration grace) override;

  // Reaps this process's ended children that are no spawned shell: what a
  // command left behind when it exited (orted's ranks, a daemon that
  // forked away) is re-parented to the agent as PID 1 or subreaper, and
  // would stay a zombie in the job's process group. A shell's status is
  // never taken: its SpawnedCommand waits for it by pid. Returns how many
  // were reaped; never blocks.
  static int ReapOrphans();

 private:
  SpawnedCommand() = default;
  bool GroupGone() const;
  pid_t pid_ = -1;
  std::optional<CommandExit> exit_;
  int stdin_fd_ = -1, stdout_fd_ = -1, stderr_fd_ = -1;
};

}  // namespace distjob

#endif  // DISTJOB_SPAWN_SPAWNED_COMMAND_H_
