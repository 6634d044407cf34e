#include "agent/worker_env.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/cli/security_flags.h"
#include "launchers/framework_env.h"
#include "rendezvous/rendezvous_kind.h"

namespace distjob {

absl::StatusOr<JobEnv> ResolveJob(const DiscoveryOptions& options,
                                  const EnvMap& env,
                                  std::function<bool()> cancelled) {
  auto job = ResolveJobEnv(options, env, std::move(cancelled));
  if (!job.ok()) return job.status();
  auto extra = FrameworkEnv(*job, options, env);
  if (!extra.ok()) return extra.status();
  job->extra = *std::move(extra);
  return job;
}

LaunchOptions EffectiveLaunch(const JobEnv& job, const LaunchOptions& launch) {
  LaunchOptions effective = launch;
  effective.pod_index = job.pod_index;
  if (!job.pytorch_layout) return effective;
  effective.node_rank = job.node_rank;
  effective.min_nodes = effective.max_nodes = job.nnodes;
  effective.nnodes = absl::StrCat(job.nnodes);
  effective.master_addr = job.master_addr;
  effective.master_port = job.master_port;
  return effective;
}

bool WorkerStoreOnAgent(const LaunchOptions& launch) {
  if (launch.worker_store_agent.has_value()) return *launch.worker_store_agent;
  if (launch.rdzv_backend == RdzvBackend::kStatic && !launch.standalone) {
    return true;
  }
  return !launch.torch_disable_shared_store;
}

std::string WorkerStoreOffReason(const LaunchOptions& launch) {
  if (WorkerStoreOnAgent(launch)) return "";
  if (launch.worker_store_agent.has_value()) {
    return launch.worker_store_setting;
  }
  return "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1";
}

PyTorchGroupInfo LaunchGroupFields(const LaunchOptions& launch) {
  PyTorchGroupInfo g;
  g.local_world_size = launch.nproc;
  g.role_name = launch.role;
  g.max_restarts = launch.max_restarts;
  g.virtual_local_rank = launch.virtual_local_rank;
  g.signals_to_handle = launch.signals_to_handle;
  return g;
}

WorkerRound PlanRound(const LaunchOptions& launch) {
  WorkerRound round;
  round.group = LaunchGroupFields(launch);
  PyTorchGroupInfo& g = round.group;
  g.use_agent_store = WorkerStoreOnAgent(launch);
  g.run_id = launch.rdzv_id;
  const RendezvousKind kind = ChooseRendezvous(
      launch.standalone, launch.max_nodes, launch.rdzv_backend);
  if (kind == RendezvousKind::kLocal) {
    // One node: the local rendezvous picks a free port at each round.
    g.world_size = g.role_world_size = launch.nproc;
    g.master_addr = launch.local_addr.empty() ? "127.0.0.1" : launch.local_addr;
    round.undecided["MASTER_PORT"] =
        g.use_agent_store
            ? "decided at rendezvous (the port of the agent's worker store)"
            : "decided at rendezvous (a free port on this node)";
    if (launch.standalone) {
      round.undecided["TORCHELASTIC_RUN_ID"] =
          "decided at rendezvous (a fresh id for --standalone)";
    }
    return round;
  }
  if (kind == RendezvousKind::kStatic) {
    g.group_rank = launch.node_rank;
    g.group_world_size = launch.max_nodes;
    g.base_rank = g.role_base_rank = launch.node_rank * launch.nproc;
    g.world_size = g.role_world_size = launch.max_nodes * launch.nproc;
    g.master_addr = launch.master_addr;
    g.master_port = launch.master_port;
    return round;
  }
  const std::string why = absl::StrCat(
      "decided at rendezvous (nnodes ", launch.min_nodes, ":", launch.max_nodes,
      ", ", RdzvBackendName(launch.rdzv_backend), ")");
  for (const char* key :
       {"RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE",
        "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    round.undecided[key] = why;
  }
  return round;
}

EnvMap BuildWorkerEnv(const JobEnv& job, const PyTorchGroupInfo& group,
                      int local_rank, const EnvMap& agent_env,
                      const WorkerFiles& files) {
  EnvMap base = agent_env;
  // The store's secret is the agent's alone: a worker (or whatever it
  // logs or dumps) never sees it. The file's path is not secret and stays.
  base.erase(kRdzvTokenVariable);
  for (const auto& [key, value] : job.extra.vars) base[key] = value;
  EnvMap env = PyTorchWorkerEnv(group, local_rank, base, files.error_file);
  if (!files.heartbeat_file.empty()) {
    env["DISTJOB_HEARTBEAT_FILE"] = files.heartbeat_file;
  }
  if (!files.progress_file.empty()) {
    env["DISTJOB_PROGRESS_FILE"] = files.progress_file;
  }
  if (!files.timer_file.empty()) {
    // torchrun's name: FileTimerClient(os.environ[...]) works unchanged.
    env["TORCHELASTIC_TIMER_FILE"] = files.timer_file;
  }
  if (!files.server_socket.empty()) {
    // Where torch's worker_main() serves its control plane: the agent asks
    // it for the flight recorder before it stops the worker.
    env["TORCH_WORKER_SERVER_SOCKET"] = files.server_socket;
  }
  return env;
}

}  // namespace distjob
