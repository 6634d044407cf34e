// The options of `distjob-agent run --preflight`: only what run's own
// options cannot tell the checks (paths, the node health daemon); the
// names and the rendezvous endpoint are run's (docs/preflight.md).
#ifndef DISTJOB_AGENT_CLI_PREFLIGHT_FLAGS_H_
#define DISTJOB_AGENT_CLI_PREFLIGHT_FLAGS_H_

#include "absl/status/status.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"

namespace distjob {

// Registers --preflight (DISTJOB_PREFLIGHT), --check-path, --check-writable
// (repeatable) and --health-daemon (DISTJOB_HEALTH_DAEMON).
void AddPreflightFlags(FlagSet* flags, RunPreflightOptions* options);

// InvalidArgument naming the flag when a check is given without
// --preflight: it would otherwise be ignored in silence.
absl::Status CheckPreflightOptions(const RunPreflightOptions& options);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_PREFLIGHT_FLAGS_H_
