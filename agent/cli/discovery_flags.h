// The discovery and framework options of `run` and `env`: identity, peer
// sources, DNS readiness and the TensorFlow/MXNet launchers. All default
// from DISTJOB_<NAME>.
#ifndef DISTJOB_AGENT_CLI_DISCOVERY_FLAGS_H_
#define DISTJOB_AGENT_CLI_DISCOVERY_FLAGS_H_

#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"

namespace distjob {

void AddDiscoveryFlags(FlagSet* flags, RunOptions* options);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_DISCOVERY_FLAGS_H_
