// The worker processes of one attempt, as the supervisor starts them: each
// local rank's command line, environment, NUMA binding, error and heartbeat
// files and output streams.
#ifndef DISTJOB_AGENT_WORKER_GROUP_H_
#define DISTJOB_AGENT_WORKER_GROUP_H_

#include <string>
#include <vector>

#include "agent/cli/options.h"
#include "common/environment.h"
#include "discovery/job_env.h"
#include "rendezvous/rendezvous.h"
#include "supervisor/supervisor.h"
#include "supervisor/worker_logs.h"

namespace distjob {

// The workers of attempt `restart_count` in `round`: `env` is the agent's,
// `job` what discovery found; `redirects`/`tees` one stream mask a local
// rank; `progress_file` the Trainer status push's ("" for none). Logs
// local rank 0's command line and interpreter.
std::vector<WorkerSpec> BuildWorkers(const RunOptions& options,
                                     const EnvMap& env, const JobEnv& job,
                                     const RendezvousResult& round,
                                     int restart_count, WorkerLogs& files,
                                     const std::vector<int>& redirects,
                                     const std::vector<int>& tees,
                                     const std::string& progress_file);

// The directory of the workers' log files (--log-dir): torchrun's layout,
// <log_dir>/<run_id>_<random>/attempt_N/RANK/, when invoked as torchrun;
// `distjob-agent run` keeps <log_dir>/attempt_N/RANK/.
std::string RunLogDir(const LaunchOptions& launch);

}  // namespace distjob

#endif  // DISTJOB_AGENT_WORKER_GROUP_H_
