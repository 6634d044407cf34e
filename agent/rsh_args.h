// `distjob-agent rsh`'s command line, which MPI launchers build as they
// would for ssh: `rsh [ssh options] [user@]HOST COMMAND...`. The options
// are ssh's (Open MPI passes `-x`, operators add `-o K=V`, Hydra and
// Intel MPI `-x -q`...): each is accepted and ignored, since the spawn
// service has no use for them, and the list of what was ignored is kept.
// A letter ssh does not know is an error, as with ssh.
#ifndef DISTJOB_AGENT_RSH_ARGS_H_
#define DISTJOB_AGENT_RSH_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace distjob {

struct RshArgs {
  std::string host;     // without a `user@` prefix
  std::string command;  // the words after HOST joined by spaces, as ssh does
  std::vector<std::string> ignored;  // e.g. "-x", "-o ConnectTimeout=10"
};

// ssh's options that take a value (`-p 22` or `-p22`) and those that take
// none, for the help text.
inline constexpr char kSshOptionsWithValue[] = "BbcDEeFIiJLlmOoPpQRSWw";
inline constexpr char kSshFlags[] = "46AaCfGgKkMNnqsTtVvXxYy";

// InvalidArgument naming the option for a letter ssh does not know or an
// option missing its value; naming what is missing when there is no HOST
// or no COMMAND (an interactive shell is not offered).
absl::StatusOr<RshArgs> ParseRshArgs(const std::vector<std::string>& args);

}  // namespace distjob

#endif  // DISTJOB_AGENT_RSH_ARGS_H_
