// `distjob-agent run --preflight`: the checks of agent/preflight.h run
// before discovery waits, from run's own options (MASTER_ADDR, the peers,
// the c10d endpoint unless this node hosts the store) and the few
// preflight-only flags (agent/cli/preflight_flags.h). Results go to the
// agent's log, one line each.
#ifndef DISTJOB_AGENT_RUN_PREFLIGHT_H_
#define DISTJOB_AGENT_RUN_PREFLIGHT_H_

#include <optional>

#include "agent/cli/options.h"
#include "agent/preflight.h"
#include "common/environment.h"

namespace distjob {

// What run checks: the names, the endpoint to reach and the paths, from
// `options` and `env`; InvalidArgument naming a peer source that does not
// parse.
absl::StatusOr<PreflightOptions> RunPreflightChecks(const RunOptions& options,
                                                    const EnvMap& env);

// Nothing without --preflight. Otherwise runs the checks and returns the
// exit code to stop with, having written the termination message: the
// permanent class (kExitBadConfig) for a fatal result, the retryable one
// (kExitRetryElsewhere) for a retryable one. nullopt to go on: pass,
// warning, or a stop signal pending (of options.supervisor.stop_signals,
// blocked since start-up), which the agent then handles as at any start.
std::optional<int> PreflightBeforeRun(const RunOptions& options,
                                      const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_RUN_PREFLIGHT_H_
