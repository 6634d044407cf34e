// The agent-only options of `distjob-agent run` that shape supervision and
// reporting: restart policy, backoff, reporting files, health probes.
#ifndef DISTJOB_AGENT_CLI_SUPERVISOR_FLAGS_H_
#define DISTJOB_AGENT_CLI_SUPERVISOR_FLAGS_H_

#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"

namespace distjob {

// Registers the supervisor and reporting options (DISTJOB_<NAME> defaults).
void AddSupervisorFlags(FlagSet* flags, RunOptions* options);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_SUPERVISOR_FLAGS_H_
