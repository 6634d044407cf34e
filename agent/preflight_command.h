// `distjob-agent preflight`: the checks of agent/preflight.h from flags and
// the pod's environment (MASTER_ADDR, PET_RDZV_ENDPOINT, the peers the
// job's discovery sources name), for an init container.
#ifndef DISTJOB_AGENT_PREFLIGHT_COMMAND_H_
#define DISTJOB_AGENT_PREFLIGHT_COMMAND_H_

#include <string>
#include <vector>

#include "common/environment.h"

namespace distjob {

// Prints one line per check (or, with --json, one JSON document) and
// returns the KEP-3416 code: 0 pass, 10 warning, 20 retryable, 30 fatal;
// 2 for a command line that does not parse; 128+N when stopped by signal N.
int PreflightCommand(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_PREFLIGHT_COMMAND_H_
