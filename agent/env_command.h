// Discovery for `run` and the `env` subcommand: who this pod is, who its
// peers are (waiting for their DNS names), and the framework environment
// its workers get. `distjob-agent env` prints the result and launches
// nothing.
#ifndef DISTJOB_AGENT_ENV_COMMAND_H_
#define DISTJOB_AGENT_ENV_COMMAND_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/options.h"
#include "common/environment.h"
#include "discovery/identity.h"
#include "discovery/peers.h"
#include "launchers/framework_types.h"

namespace distjob {

struct JobEnv {
  std::string framework = "none";
  std::string framework_reason;
  bool has_identity = false;
  ResolvedIdentity identity;
  Cluster cluster;
  LauncherEnv extra;  // framework variables for every worker
  // Set in PyTorch operator mode: the node layout `run` uses.
  bool pytorch_layout = false;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;
  int master_port = 0;
  std::string master_source;
};

// Errors: InvalidArgument (exit 2) naming the input; DeadlineExceeded when
// peer names never resolved (the retryable exit code).
// `cancelled` (optional) is polled while waiting for DNS.
absl::StatusOr<JobEnv> ResolveJobEnv(const RunOptions& options,
                                     const EnvMap& env,
                                     std::function<bool()> cancelled = nullptr);

// Applies `job` to the launch options `run` uses (nodes, rank, master).
void ApplyJobEnv(const JobEnv& job, LaunchOptions* launch);

// The exit code for a ResolveJobEnv error.
int JobEnvExitCode(const absl::Status& status);

// `distjob-agent env [run options] [--json] [--explain] [--] [COMMAND...]`.
int EnvCommand(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_ENV_COMMAND_H_
