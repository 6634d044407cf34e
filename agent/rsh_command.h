// `distjob-agent rsh`: the remote launcher MPI calls in place of ssh
// (OMPI_MCA_plm_rsh_agent, PRTE_MCA_plm_ssh_agent, HYDRA_LAUNCHER_EXEC,
// I_MPI_HYDRA_BOOTSTRAP_EXEC). It runs COMMAND on HOST through HOST's spawn
// server (spawn/), streaming stdin, stdout and stderr, forwarding SIGINT,
// SIGTERM, SIGHUP and SIGQUIT, and exits as ssh would: with the remote
// exit status, 128+N for a remote death by signal N, 255 when HOST cannot
// be reached or the stream broke.
#ifndef DISTJOB_AGENT_RSH_COMMAND_H_
#define DISTJOB_AGENT_RSH_COMMAND_H_

#include <string>
#include <vector>

#include "common/environment.h"

namespace distjob {

// ssh's exit code when the connection failed, which MPI launchers read as
// "the daemon could not be started there".
inline constexpr int kRshConnectionFailed = 255;

// `args`: after `rsh`. The port is --spawn-port's variable,
// DISTJOB_SPAWN_PORT (default 29522); the token and TLS files the agent's
// own variables (DISTJOB_RDZV_TOKEN_FILE or DISTJOB_RDZV_TOKEN,
// DISTJOB_RDZV_TLS_*). Exit 2 for a command line or variable that does not
// parse, naming it.
int RshCommand(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_RSH_COMMAND_H_
