// `distjob-agent status --rdzv-endpoint HOST[:PORT] [--rdzv-id ID] [--json]`
#ifndef DISTJOB_AGENT_STATUS_COMMAND_H_
#define DISTJOB_AGENT_STATUS_COMMAND_H_

#include <string>
#include <vector>

#include "common/environment.h"

namespace distjob {

// Prints the rendezvous state and returns the exit code: 0, 2 for bad
// flags, 1 when the job is not in the store, 138 when the store is
// unreachable.
int StatusCommand(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_STATUS_COMMAND_H_
