// One launcher, not two: when the agent's worker command is itself a
// torchrun launcher (`bash -c "torchrun ..."` under the agent as
// ENTRYPOINT), the agent hands the process over to it instead of forming a
// second rendezvous around it.
#ifndef DISTJOB_AGENT_NESTED_LAUNCHER_H_
#define DISTJOB_AGENT_NESTED_LAUNCHER_H_

#include <string>
#include <vector>

namespace distjob {

// Restores the signal state the agent started with and execs `command`
// (searched in PATH) in the agent's place; returns only when exec fails,
// with 127 (not found) or 126, after saying why on stderr.
int HandOverToLauncher(const std::vector<std::string>& command);

}  // namespace distjob

#endif  // DISTJOB_AGENT_NESTED_LAUNCHER_H_
