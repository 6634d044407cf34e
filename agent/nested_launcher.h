// One launcher, not two: when the agent's worker command is itself a
// torchrun launcher (`bash -c "torchrun ..."` under the agent as
// ENTRYPOINT), the agent hands the process over to it instead of forming a
// second rendezvous around it.
#ifndef DISTJOB_AGENT_NESTED_LAUNCHER_H_
#define DISTJOB_AGENT_NESTED_LAUNCHER_H_

#include <string>
#include <vector>

namespace distjob {

// The options given on the command line `args` before its last
// `command_words` words (the worker command), as given, without values:
// the inner launcher reads its own command line, not the agent's, so a
// handover drops them. A word that is not "--name", "--name=value" or
// "-x..." (a letter) is an option's value.
std::vector<std::string> OptionsBeforeCommand(
    const std::vector<std::string>& args, size_t command_words);

// Restores the signal state the agent started with and execs `command`
// (searched in PATH) in the agent's place; returns only when exec fails,
// with 127 (not found) or 126, after saying why on stderr. `dropped` (the
// agent's own options, OptionsBeforeCommand) are named in one warning line
// first.
int HandOverToLauncher(const std::vector<std::string>& command,
                       const std::vector<std::string>& dropped);

}  // namespace distjob

#endif  // DISTJOB_AGENT_NESTED_LAUNCHER_H_
