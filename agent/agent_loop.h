// The agent's outer loop for `run`: rendezvous, launch the group, supervise
// it, and decide, from how it ended and the exit-code policy, whether to
// restart or to exit and with which code (DESIGN.md §3.5).
#ifndef DISTJOB_AGENT_AGENT_LOOP_H_
#define DISTJOB_AGENT_AGENT_LOOP_H_

#include "agent/options.h"
#include "common/environment.h"

namespace distjob {

// Exit codes of the agent itself (the workers' own codes pass through).
inline constexpr int kExitBadConfig = 2;
inline constexpr int kExitRendezvousUnavailable = 138;

// Runs the job and returns the agent's exit code.
int RunAgent(const RunOptions& options, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_AGENT_LOOP_H_
