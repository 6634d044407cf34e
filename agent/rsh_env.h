// The environment in which `distjob-agent rsh` finds its settings, for the
// processes that run it: mpirun on the launcher, and the commands a
// worker's spawn server runs (Open MPI's tree spawn and Hydra's proxies
// call rsh there to reach the other workers). rsh parses only its
// environment (its command line is ssh's), so the agent's own flags go
// into it as their variables. The token itself never does (DESIGN 3.7:
// MPI forwards its environment to every rank): a token given as
// DISTJOB_RDZV_TOKEN is taken out and written to a private file instead.
#ifndef DISTJOB_AGENT_RSH_ENV_H_
#define DISTJOB_AGENT_RSH_ENV_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "common/environment.h"

namespace distjob {

// The variables rsh reads, as `options` has them: DISTJOB_SPAWN_PORT, and
// the paths of the token file and TLS files and the TLS server name when
// given (by flag or variable). For `env --explain`: no file is written.
EnvMap RshSettingsEnv(const RunOptions& options);

// `env` for a process that runs rsh: RshSettingsEnv over it, without
// DISTJOB_RDZV_TOKEN; a token that came only from that variable is
// written to `dir`/token (mode 0600; `dir` the caller's private
// directory, which it removes) and named by DISTJOB_RDZV_TOKEN_FILE.
// Internal naming the file when it cannot be written.
absl::StatusOr<EnvMap> MakeRshEnv(const RunOptions& options, EnvMap env,
                                  const std::string& dir);

// The name of the token's file in the caller's private directory.
inline constexpr char kRshTokenFile[] = "token";

}  // namespace distjob

#endif  // DISTJOB_AGENT_RSH_ENV_H_
