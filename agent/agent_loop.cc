#include "agent/agent_loop.h"

#include <csignal>
#include <memory>
#include <vector>

#include "agent/env_command.h"
#include "agent/exit_policy.h"
#include "agent/signal_names.h"
#include "agent/supervisor.h"
#include "common/logging.h"
#include "launchers/pytorch_env.h"
#include "launchers/worker_command.h"
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
  return absl::UnimplementedError(
      "multi-node rendezvous is not available in this build; use "
      "--standalone or --nnodes 1");
}

}  // namespace

int RunAgent(const RunOptions& given_options, const EnvMap& given_env) {
  auto supervisor = Supervisor::Create(given_options.supervisor);
  if (!supervisor.ok()) {
    DJ_LOG_ERROR("cannot set up supervision: {}",
                 supervisor.status().ToString());
    return 1;
  }
  // Discovery once, before any round: identity, peers (DNS included) and
  // the framework variables every worker gets on top of the agent's env.
  // After Create, so a stop signal (blocked, pending) ends a DNS wait.
  const std::vector<int>& stop_signals = given_options.supervisor.stop_signals;
  auto job = ResolveJobEnv(given_options, given_env, [&stop_signals] {
    sigset_t pending;
    if (sigpending(&pending) != 0) return false;
    for (int sig : stop_signals) {
      if (sigismember(&pending, sig) == 1) return true;
    }
    return false;
  });
  if (!job.ok()) {
    DJ_LOG_ERROR("{}", job.status().message());
    if (job.status().code() == absl::StatusCode::kCancelled) {
      // The signal is still pending; the supervisor will not read it now.
      sigset_t pending;
      sigpending(&pending);
      for (int sig : stop_signals) {
        if (sigismember(&pending, sig) == 1) return 128 + sig;
      }
      return 128 + SIGTERM;
    }
    return JobEnvExitCode(job.status());
  }
  RunOptions options = given_options;
  ApplyJobEnv(*job, &options.launch);
  EnvMap env = given_env;
  for (const auto& [key, value] : job->extra.vars) env[key] = value;
  auto rendezvous = MakeRendezvous(options);
  if (!rendezvous.ok()) {
    DJ_LOG_ERROR("{}", rendezvous.status().message());
    return kExitBadConfig;
  }
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
    DJ_LOG_INFO("restarting the worker group ({}/{})", restart_count,
                options.launch.max_restarts);
  }
  (*rendezvous)->Shutdown();
  (*supervisor)->DrainDescendants();
  if ((*supervisor)->stop_signal() != 0 && exit_code == 0) {
    exit_code = 128 + (*supervisor)->stop_signal();
  }
  return exit_code;
}

}  // namespace distjob
