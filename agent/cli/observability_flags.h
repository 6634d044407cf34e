// The options of `distjob-agent run` that show the job from outside:
// metrics and HTTP probes, the event log.
#ifndef DISTJOB_AGENT_CLI_OBSERVABILITY_FLAGS_H_
#define DISTJOB_AGENT_CLI_OBSERVABILITY_FLAGS_H_

#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"

namespace distjob {

// Registers --metrics-port (DISTJOB_METRICS_PORT), --metrics-timeout
// (DISTJOB_METRICS_TIMEOUT), --metrics-tls-cert and
// --metrics-tls-key (DISTJOB_METRICS_TLS_CERT, DISTJOB_METRICS_TLS_KEY),
// --log-format (DISTJOB_LOG_FORMAT), --worker-log-format
// (DISTJOB_WORKER_LOG_FORMAT) and torchrun's --event-log-handler
// (PET_EVENT_LOG_HANDLER).
void AddObservabilityFlags(FlagSet* flags, RunOptions* options);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_OBSERVABILITY_FLAGS_H_
