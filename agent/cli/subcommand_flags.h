// The flag handling every subcommand shares with `run`: the same FlagSet
// spellings (--a-b / --a_b, "--f v" / "--f=v"), -h/--help for the
// subcommand's own usage, and exit 2 with a message naming the bad flag.
#ifndef DISTJOB_AGENT_CLI_SUBCOMMAND_FLAGS_H_
#define DISTJOB_AGENT_CLI_SUBCOMMAND_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/cli/flag_parser.h"
#include "common/environment.h"

namespace distjob {

// The exit code of a command line that does not parse: the agent's
// kExitBadConfig (agent/exit_codes.h, above this package; exit_codes_test
// checks the two agree).
inline constexpr int kExitUsage = 2;

// True when -h or --help comes before "--". These subcommands run no worker
// command, so a --help after a flag's value is still theirs (`run` stops
// at the worker command instead).
bool HelpRequested(const std::vector<std::string>& args);

// Parses `args` with `flags` for `distjob-agent <command>`. Returns the code
// to exit with when the command is done (help printed: 0; an error printed
// to stderr: kExitUsage), or nullopt with the positional arguments in
// `*positional`. At most `max_positional` are accepted.
std::optional<int> ParseSubcommandFlags(absl::string_view command,
                                        const FlagSet& flags,
                                        const std::vector<std::string>& args,
                                        const EnvMap& env,
                                        size_t max_positional,
                                        std::vector<std::string>* positional);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_SUBCOMMAND_FLAGS_H_
