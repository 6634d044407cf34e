// A Command (spawn/command.h) that runs nothing, for the spawn call's fuzz
// target and tests: its pipes are real, so a call's pump reads, writes and
// polls them as it would a shell's, but what it prints and how it ends are
// scripted, and what it was sent is kept in a FakeCommandLog that outlives
// it (the call owns and destroys the command).
#ifndef DISTJOB_SPAWN_FAKE_COMMAND_H_
#define DISTJOB_SPAWN_FAKE_COMMAND_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "spawn/command.h"

namespace distjob {

struct FakeCommandScript {
  // Written to its stdout and stderr pipes when it starts (as much as the
  // pipes take without blocking; the log keeps what was written).
  std::string stdout_data, stderr_data;
  enum class Ends {
    kAtOnce,        // it has ended when it starts (its output is buffered)
    kOnStdinClose,  // like `cat`: when its stdin is closed
    kOnSignal,      // only when a signal or EndGroup ends it
  };
  Ends ends = Ends::kAtOnce;
  // How it ends on its own (kAtOnce, kOnStdinClose).
  CommandExit exit;
  // False: it closed its stdin at once, so writes to it fail (EPIPE).
  bool reads_stdin = true;
};

// What a FakeCommand was given; filled as the call runs.
struct FakeCommandLog {
  int started = 0;             // commands started with this log
  std::string command;         // the last one's command line
  std::string stdout_written;  // what it put on its pipes
  std::string stderr_written;
  std::string stdin_received;  // what reached its stdin, in order
  std::vector<int> signals;    // valid signal numbers sent to it
  int end_group_calls = 0;
  std::optional<CommandExit> exit;  // how it ended, once it did
};

class FakeCommand final : public Command {
 public:
  // A CommandStarter (spawn/command.h) for `script`; `log` must outlive
  // every command it starts.
  static CommandStarter Starter(FakeCommandScript script, FakeCommandLog* log);

  ~FakeCommand() override;
  FakeCommand(const FakeCommand&) = delete;
  FakeCommand& operator=(const FakeCommand&) = delete;

  pid_t pid() const override;
  int stdin_fd() const override;
  int stdout_fd() const override;
  int stderr_fd() const override;
  void CloseStdin() override;
  void CloseStdout() override;
  void CloseStderr() override;
  // Kept in the log; SIGKILL, SIGTERM, SIGINT, SIGHUP and SIGQUIT end it
  // (with that signal) if it still runs. InvalidArgument as the real one.
  absl::Status Signal(int sig) const override;
  std::optional<CommandExit> Poll() override;
  CommandExit EndGroup(absl::Duration grace) override;

 private:
  FakeCommand(FakeCommandScript script, FakeCommandLog* log);
  absl::Status Open();
  // Ends it with `how` if it still runs: its output pipes' far ends close,
  // so the pump sees their end as it would a process's.
  void End(CommandExit how) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainStdin() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FakeCommandScript script_;
  FakeCommandLog* const log_;
  // The call's pump uses a command from two threads (stdin and signals on
  // one, output and the end on the other), as it does a real one.
  mutable absl::Mutex mu_;
  // Our ends (the pump's) and the far ends (the "process's").
  mutable int stdin_fd_ ABSL_GUARDED_BY(mu_) = -1;
  mutable int stdout_fd_ ABSL_GUARDED_BY(mu_) = -1;
  mutable int stderr_fd_ ABSL_GUARDED_BY(mu_) = -1;
  mutable int stdin_far_ ABSL_GUARDED_BY(mu_) = -1;
  mutable int stdout_far_ ABSL_GUARDED_BY(mu_) = -1;
  mutable int stderr_far_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace distjob

#endif  // DISTJOB_SPAWN_FAKE_COMMAND_H_
