// The one worker-environment builder: `run` launches each worker with it
// and `env` prints it, so the two cannot disagree. What only the
// rendezvous decides (ranks and sizes of an elastic job, a standalone
// job's free port and run id) is marked as such before the round, never
// replaced by a guess.
#ifndef DISTJOB_AGENT_WORKER_ENV_H_
#define DISTJOB_AGENT_WORKER_ENV_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "common/environment.h"
#include "discovery/job_env.h"
#include "launchers/pytorch_env.h"

namespace distjob {

// Discovery (discovery/job_env) and then the framework variables every
// worker gets (launchers/framework_env): what `run` and `env` both start
// from. `cancelled` (optional) is polled while waiting for DNS.
absl::StatusOr<JobEnv> ResolveJob(const DiscoveryOptions& options,
                                  const EnvMap& env,
                                  std::function<bool()> cancelled = nullptr);

// The launch options in effect once discovery is done: the PyTorch
// operators' master/worker layout fixes the nodes, this node's rank and
// the master; otherwise `launch` as given.
LaunchOptions EffectiveLaunch(const JobEnv& job, const LaunchOptions& launch);

// True when the agent serves the workers' TCPStore for this launch
// (TORCHELASTIC_USE_AGENT_STORE=True): --worker-store when given, else as
// current torchrun: static always (the static handler's store is the
// workers'), the others unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1.
bool WorkerStoreOnAgent(const LaunchOptions& launch);
// The setting that hands the workers' store to worker rank 0 ("--worker-store
// worker", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"); "" when the agent
// serves it.
std::string WorkerStoreOffReason(const LaunchOptions& launch);

// The part of every round's group the launch options alone fix (local
// world size, role, restarts allowed, virtual local ranks, signals to
// handle): `run`'s rounds and `env`'s plan start from the same one.
PyTorchGroupInfo LaunchGroupFields(const LaunchOptions& launch);

// Where this node's workers stand in a round.
struct WorkerRound {
  PyTorchGroupInfo group;
  // Variable -> why its value is not known yet, e.g. "decided at
  // rendezvous (nnodes 2:4)". Empty once a rendezvous decided the round.
  std::map<std::string, std::string> undecided;
};

// The first round as far as it is known before any rendezvous, from the
// effective launch options and the same choice of rendezvous as `run`
// (rendezvous/rendezvous_kind.h).
WorkerRound PlanRound(const LaunchOptions& launch);

// Per-attempt files of one worker; empty when there are none.
struct WorkerFiles {
  std::string error_file;      // TORCHELASTIC_ERROR_FILE
  std::string heartbeat_file;  // DISTJOB_HEARTBEAT_FILE
  std::string progress_file;   // DISTJOB_PROGRESS_FILE (Trainer v2 push)
  std::string timer_file;      // TORCHELASTIC_TIMER_FILE (FileTimer FIFO)
  std::string server_socket;   // TORCH_WORKER_SERVER_SOCKET (evidence)
};

// The full environment of local worker `local_rank`: the agent's own
// `agent_env`, the framework variables discovery found for `job`, then
// torchrun's variables for `group`, then the files.
EnvMap BuildWorkerEnv(const JobEnv& job, const PyTorchGroupInfo& group,
                      int local_rank, const EnvMap& agent_env,
                      const WorkerFiles& files);

}  // namespace distjob

#endif  // DISTJOB_AGENT_WORKER_ENV_H_
