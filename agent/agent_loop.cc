#include "agent/agent_loop.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "agent/exit_policy.h"
#include "agent/signal_names.h"
#include "agent/supervisor.h"
#include "common/logging.h"
#include "launchers/pytorch_env.h"
#include "launchers/worker_command.h"
#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/standalone_rendezvous.h"

namespace distjob {
namespace {

std::vector<WorkerSpec> BuildWorkers(const RunOptions& options,
                                     const EnvMap& env,
                                     const RendezvousResult& round,
                                     int restart_count) {
  const LaunchOptions& launch = options.launch;
  PyTorchGroupInfo group;
  group.group_rank = round.group_rank;
  group.group_world_size = round.group_world_size;
  group.base_rank = round.base_rank;
  group.world_size = round.world_size;
  group.role_base_rank = round.base_rank;
  group.role_world_size = round.world_size;
  group.local_world_size = launch.nproc;
  group.role_name = launch.role;
  group.master_addr = round.master_addr;
  group.master_port = round.master_port;
  group.restart_count = restart_count;
  group.max_restarts = launch.max_restarts;
  group.run_id = round.run_id;
  group.use_agent_store = round.use_agent_store;

  WorkerCommandOptions command;
  command.module = launch.module;
  command.no_python = launch.no_python;
  command.python = Lookup(env, "PYTHON_EXEC").value_or("python3");

  std::vector<WorkerSpec> workers;
  for (int local_rank = 0; local_rank < launch.nproc; ++local_rank) {
    WorkerSpec spec;
    spec.local_rank = local_rank;
    spec.process.argv = WorkerArgv(options.command, command, local_rank);
    spec.process.env = PyTorchWorkerEnv(group, local_rank, env, "");
    workers.push_back(std::move(spec));
  }
  return workers;
}

absl::StatusOr<std::unique_ptr<Rendezvous>> MakeRendezvous(
    const RunOptions& options) {
  const LaunchOptions& launch = options.launch;
  if (launch.standalone || (launch.max_nodes == 1 && launch.rdzv_backend ==
                                                         "static")) {
    return std::make_unique<StandaloneRendezvous>(
        launch.local_addr, launch.standalone ? "" : launch.rdzv_id);
  }
  RendezvousParams params;
  params.backend = launch.rdzv_backend;
  params.endpoint = launch.rdzv_endpoint;
  params.run_id = launch.rdzv_id;
  params.conf = launch.rdzv_conf;
  params.min_nodes = launch.min_nodes;
  params.max_nodes = launch.max_nodes;
  params.local_addr = launch.local_addr;
  params.node_rank = launch.node_rank;
  params.master_addr = launch.master_addr;
  params.master_port = launch.master_port;
  return MakeRendezvousFor(params);
}

}  // namespace

int RunAgent(const RunOptions& options, const EnvMap& env) {
  auto supervisor = Supervisor::Create(options.supervisor);
  if (!supervisor.ok()) {
    DJ_LOG_ERROR("cannot set up supervision: {}",
                 supervisor.status().ToString());
    return 1;
  }
  auto rendezvous = MakeRendezvous(options);
  if (!rendezvous.ok()) {
    DJ_LOG_ERROR("{}", rendezvous.status().message());
    return absl::IsInvalidArgument(rendezvous.status())
               ? kExitBadConfig
               : kExitRendezvousUnavailable;
  }
  // Membership changes are seen on the rendezvous' own thread; they stop
  // the running group so the loop re-rendezvouses.
  Supervisor* sup = supervisor->get();
  (*rendezvous)->SetOnMembershipChange([sup] { sup->Interrupt(); });
  const ExitPolicy policy;
  int restart_count = 0;
  int exit_code = 0;
  for (;;) {
    auto round = (*rendezvous)->Next(options.launch.nproc);
    if (!round.ok()) {
      DJ_LOG_ERROR("rendezvous failed: {}", round.status().ToString());
      exit_code = kExitRendezvousUnavailable;
      break;
    }
    restart_count = std::max(restart_count, round->restart_count);
    auto group = (*supervisor)->RunGroup(
        BuildWorkers(options, env, *round, restart_count));
    if (!group.ok()) {
      DJ_LOG_ERROR("cannot start the workers: {}", group.status().ToString());
      exit_code = 1;
      break;
    }
    if (group->outcome == GroupOutcome::kSucceeded) {
      exit_code = 0;
      break;
    }
    if (group->outcome == GroupOutcome::kStopped) {
      exit_code = 128 + (*supervisor)->stop_signal();
      break;
    }
    if (group->outcome == GroupOutcome::kInterrupted) continue;
    if ((*rendezvous)->MembershipChanged()) {
      // The failure follows a peer loss the agent saw: part of that change.
      DJ_LOG_INFO("worker failure after a membership change; re-forming");
      continue;
    }
    const WorkerExit& failure = *group->first_failure;
    exit_code = failure.exit_code;
    const ExitClass exit_class = policy.Classify(exit_code);
    DJ_LOG_ERROR("worker local_rank={} (pid {}) failed with exit code {} "
                 "({})",
                 failure.local_rank, failure.pid, exit_code,
                 ExitClassName(exit_class));
    if (exit_class != ExitClass::kRetryable ||
        restart_count >= options.launch.max_restarts) {
      break;
    }
    ++restart_count;
    (*rendezvous)->NoteFailureRestart(restart_count);
    DJ_LOG_INFO("restarting the worker group ({}/{})", restart_count,
                options.launch.max_restarts);
  }
  (*rendezvous)->Shutdown(exit_code == 0);
  (*supervisor)->DrainDescendants();
  if ((*supervisor)->stop_signal() != 0 && exit_code == 0) {
    exit_code = 128 + (*supervisor)->stop_signal();
  }
  return exit_code;
}

}  // namespace distjob
