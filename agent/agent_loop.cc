#include "agent/agent_loop.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/barrier.h"
#include "agent/cgroup_oom.h"
#include "agent/env_command.h"
#include "agent/exit_policy.h"
#include "agent/health.h"
#include "agent/report.h"
#include "agent/signal_names.h"
#include "agent/supervisor.h"
#include "agent/worker_logs.h"
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
                                     int restart_count, WorkerLogs& files,
                                     const std::vector<int>& redirects,
                                     const std::vector<int>& tees) {
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
    spec.process.env = PyTorchWorkerEnv(
        group, local_rank, env, files.ErrorFile(restart_count, local_rank));
    const int redirect = redirects[static_cast<size_t>(local_rank)];
    const int tee = tees[static_cast<size_t>(local_rank)];
    if ((redirect | tee) != 0) {
      // torchrun's prefix: role name and local rank.
      auto streams =
          files.OpenStreams(restart_count, local_rank, redirect, tee,
                            absl::StrCat("[", launch.role, local_rank, "]:"));
      if (streams.ok()) {
        spec.process.stdout_fd = streams->stdout_fd;
        spec.process.stderr_fd = streams->stderr_fd;
      } else {
        DJ_LOG_WARNING("worker output stays on the console: {}",
                       streams.status());
      }
    }
    if (options.supervisor.hang_timeout > absl::ZeroDuration() &&
        files.enabled()) {
      spec.heartbeat_file = files.HeartbeatFile(restart_count, local_rank);
      spec.process.env["DISTJOB_HEARTBEAT_FILE"] = spec.heartbeat_file;
    }
    workers.push_back(std::move(spec));
  }
  return workers;
}

absl::StatusOr<std::unique_ptr<Rendezvous>> MakeRendezvous(
    const RunOptions& options) {
  const LaunchOptions& launch = options.launch;
  if (launch.standalone ||
      (launch.max_nodes == 1 && launch.rdzv_backend == "static")) {
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

// The outcome of the run, for the termination message and error file.
RunReport MakeReport(const std::string& outcome, int exit_code,
                     int restart_count, const RunOptions& options) {
  RunReport report;
  report.outcome = outcome;
  report.exit_code = exit_code;
  report.restarts = restart_count;
  report.max_restarts = options.launch.max_restarts;
  return report;
}

RootCause MakeRootCause(const WorkerExit& failure, const WorkerLogs& files,
                        int attempt, const std::string& command) {
  RootCause cause;
  cause.local_rank = failure.local_rank;
  cause.pid = failure.pid;
  cause.exit_code = failure.exit_code;
  cause.term_signal = failure.term_signal;
  cause.time = failure.time;
  cause.error_file = files.ErrorFile(attempt, failure.local_rank);
  if (failure.exec_errno != 0) {
    cause.reason = absl::StrCat("cannot execute '", command,
                                "': ", std::strerror(failure.exec_errno));
  }
  return cause;
}

void Report(const RunReport& report, const SupervisorOptions& options) {
  const std::string message = FormatTerminationMessage(report);
  // The kubelet falls back to the log tail when the file is empty: the
  // summary line is also the agent's last log line.
  DJ_LOG_INFO("{}", message.substr(0, message.find('\n')));
  if (!options.termination_log.empty()) {
    absl::Status written =
        WriteTerminationMessage(options.termination_log, message);
    if (!written.ok()) {
      DJ_LOG_DEBUG("no termination message: {}", written);
    }
  }
  if (!options.error_file.empty() && report.root_cause.has_value()) {
    absl::Status written =
        WriteRootCauseErrorFile(options.error_file, *report.root_cause);
    if (!written.ok()) DJ_LOG_WARNING("no error file: {}", written);
  }
}

}  // namespace

int RunAgent(const RunOptions& given_options, const EnvMap& given_env) {
  auto supervisor = Supervisor::Create(given_options.supervisor);
  if (!supervisor.ok()) {
    DJ_LOG_ERROR("cannot set up supervision: {}",
                 supervisor.status().ToString());
    Report(MakeReport("error", 1, 0, given_options), given_options.supervisor);
    return 1;
  }
  // Discovery once, before any round: identity, peers (DNS included) and
  // the framework variables every worker gets on top of the agent's env.
  // After Create, so that a stop signal ends a DNS wait.
  auto job = ResolveJobEnv(given_options, given_env, [&supervisor] {
    return (*supervisor)->PollStopSignal() != 0;
  });
  if (!job.ok()) {
    DJ_LOG_ERROR("{}", job.status().message());
    const int stop_signal = (*supervisor)->stop_signal();
    const int code =
        stop_signal != 0 ? 128 + stop_signal : JobEnvExitCode(job.status());
    Report(MakeReport(stop_signal != 0 ? "stopped" : "error", code, 0,
                      given_options),
           given_options.supervisor);
    return code;
  }
  RunOptions options = given_options;
  ApplyJobEnv(*job, &options.launch);
  EnvMap env = given_env;
  for (const auto& [key, value] : job->extra.vars) env[key] = value;
  // Once per job, not per restart: a restarted group's peers are up.
  const BarrierPlan barrier = PlanBarrier(*job, options);
  if (barrier.run) {
    absl::Status s = RunBarrier(barrier, [&supervisor] {
      return (*supervisor)->PollStopSignal() != 0;
    });
    if (!s.ok()) {
      const int stop_signal = (*supervisor)->stop_signal();
      int code = absl::IsInvalidArgument(s) ? kExitBadConfig
                                            : kExitRendezvousUnavailable;
      std::string outcome = code == kExitBadConfig ? "error" : "rendezvous";
      if (stop_signal != 0) {
        code = 128 + stop_signal;
        outcome = "stopped";
      } else {
        DJ_LOG_ERROR("{}", s.message());
      }
      RunReport report = MakeReport(outcome, code, 0, options);
      report.stop_signal = stop_signal;
      Report(report, options.supervisor);
      return code;
    }
  } else if (job->has_identity) {
    DJ_LOG_DEBUG("no start barrier: {}", barrier.skip_reason);
  }
  auto rendezvous = MakeRendezvous(options);
  if (!rendezvous.ok()) {
    DJ_LOG_ERROR("{}", rendezvous.status().message());
    const int code = absl::IsInvalidArgument(rendezvous.status())
                         ? kExitBadConfig
                         : kExitRendezvousUnavailable;
    Report(MakeReport("error", code, 0, options), options.supervisor);
    return code;
  }
  // Membership changes are seen on the rendezvous' own thread; they stop
  // the running group so the loop re-rendezvouses.
  Supervisor* sup = supervisor->get();
  (*rendezvous)->SetOnMembershipChange([sup] { sup->Interrupt(); });
  auto files = WorkerLogs::Create(options.launch.log_dir);
  if (!files.ok()) {
    DJ_LOG_ERROR("{}", files.status().message());
    Report(MakeReport("error", kExitBadConfig, 0, options), options.supervisor);
    return kExitBadConfig;
  }
  std::unique_ptr<HealthServer> health;
  if (options.supervisor.health_port != 0) {
    auto started = HealthServer::Start(options.supervisor.health_port);
    if (!started.ok()) {
      DJ_LOG_ERROR("{}", started.status().message());
      Report(MakeReport("error", kExitBadConfig, 0, options),
             options.supervisor);
      return kExitBadConfig;
    }
    health = *std::move(started);
    DJ_LOG_INFO("health server on port {}", health->port());
    (*supervisor)->set_on_group_running([h = health.get()](bool running) {
      h->SetReady(running);
    });
  }
  const OomCounter oom_counter = OomCounter::ForSelf();
  if (!oom_counter.path().has_value()) {
    DJ_LOG_DEBUG(
        "no cgroup OOM-kill counter found: OOM kills are not "
        "reported");
  }
  auto redirects =
      ParseStreamMask(options.launch.redirects, options.launch.nproc);
  auto tees = ParseStreamMask(options.launch.tee, options.launch.nproc);
  if (!redirects.ok() || !tees.ok()) {
    DJ_LOG_ERROR("{}: {}", !redirects.ok() ? "--redirects" : "--tee",
                 !redirects.ok() ? redirects.status().message()
                                 : tees.status().message());
    Report(MakeReport("error", kExitBadConfig, 0, options), options.supervisor);
    return kExitBadConfig;
  }
  if (!files->enabled()) {
    DJ_LOG_WARNING(
        "no writable temporary directory: workers get no "
        "TORCHELASTIC_ERROR_FILE and the hang watchdog is off");
  }
  ExitPolicy policy;
  policy.permanent_overrides = options.supervisor.permanent_exit_codes;
  policy.retryable_overrides = options.supervisor.retryable_exit_codes;
  policy.restart_on_any_failure = options.supervisor.restart_on_any_failure;
  int restart_count = 0;
  int exit_code = 0;
  RunReport report;
  absl::Duration backoff = options.supervisor.restart_backoff;
  for (;;) {
    auto round = (*rendezvous)->Next(options.launch.nproc);
    if (!round.ok()) {
      DJ_LOG_ERROR("rendezvous failed: {}", round.status().ToString());
      exit_code = kExitRendezvousUnavailable;
      report = MakeReport("rendezvous", exit_code, restart_count, options);
      break;
    }
    restart_count = std::max(restart_count, round->restart_count);
    if (absl::Status made =
            files->PrepareAttempt(restart_count, options.launch.nproc);
        !made.ok()) {
      DJ_LOG_WARNING("worker error files unavailable: {}", made);
    }
    const std::optional<int64_t> ooms_before = oom_counter.Read();
    auto group =
        (*supervisor)
            ->RunGroup(BuildWorkers(options, env, *round, restart_count, *files,
                                    *redirects, *tees));
    files->FinishAttempt();
    if (!group.ok()) {
      DJ_LOG_ERROR("cannot start the workers: {}", group.status().ToString());
      exit_code = 1;
      report = MakeReport("error", exit_code, restart_count, options);
      break;
    }
    const std::optional<int64_t> ooms_after = oom_counter.Read();
    // Only a rise of the cgroup's counter is an OOM kill: a SIGKILL from
    // the agent's grace period or from `kill -9` leaves it unchanged.
    const bool oom = ooms_before.has_value() && ooms_after.has_value() &&
                     *ooms_after > *ooms_before;
    if (oom) {
      DJ_LOG_WARNING(
          "the kernel's OOM killer ended {} process(es) of the "
          "worker group ({})",
          *ooms_after - *ooms_before, *oom_counter.path());
    }
    if (group->outcome == GroupOutcome::kSucceeded) {
      exit_code = 0;
      report = MakeReport("success", exit_code, restart_count, options);
      break;
    }
    if (group->outcome == GroupOutcome::kStopped) {
      exit_code = 128 + (*supervisor)->stop_signal();
      report = MakeReport("stopped", exit_code, restart_count, options);
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
    // A hung worker may exit 0 on SIGTERM: it still failed, retryably.
    if (group->hang && exit_code == 0) exit_code = 128 + SIGTERM;
    const ExitClass exit_class =
        group->hang ? ExitClass::kRetryable : policy.Classify(exit_code);
    DJ_LOG_ERROR(
        "worker local_rank={} (pid {}) failed with exit code {} "
        "({})",
        failure.local_rank, failure.pid, exit_code, ExitClassName(exit_class));
    report = MakeReport(
        failure.exec_errno != 0 ? "exec-failed" : ExitClassName(exit_class),
        exit_code, restart_count, options);
    report.oom = oom;
    report.hang = group->hang;
    report.root_cause = MakeRootCause(
        failure, *files, restart_count,
        options.command.empty() ? std::string() : options.command[0]);
    if (oom && failure.term_signal == SIGKILL &&
        report.root_cause->reason.empty()) {
      report.root_cause->reason = "killed by the kernel's OOM killer";
    }
    if (exit_class != ExitClass::kRetryable ||
        restart_count >= options.launch.max_restarts) {
      break;
    }
    ++restart_count;
    (*rendezvous)->NoteFailureRestart(restart_count);
    if (backoff > absl::ZeroDuration()) {
      DJ_LOG_INFO("restarting the worker group ({}/{}) in {}", restart_count,
                  options.launch.max_restarts, absl::FormatDuration(backoff));
      // A stop signal during the pause ends the job: no further attempt.
      if (!(*supervisor)->Sleep(backoff)) {
        exit_code = 128 + (*supervisor)->stop_signal();
        report = MakeReport("stopped", exit_code, restart_count, options);
        break;
      }
      backoff = std::min(backoff * 2, options.supervisor.restart_backoff_max);
    } else {
      DJ_LOG_INFO("restarting the worker group ({}/{})", restart_count,
                  options.launch.max_restarts);
    }
    if ((*supervisor)->stop_signal() != 0) {
      exit_code = 128 + (*supervisor)->stop_signal();
      report = MakeReport("stopped", exit_code, restart_count, options);
      break;
    }
  }
  (*rendezvous)->Shutdown(exit_code == 0);
  (*supervisor)->DrainDescendants();
  if ((*supervisor)->stop_signal() != 0 && exit_code == 0) {
    exit_code = 128 + (*supervisor)->stop_signal();
    report.outcome = "stopped";
    report.exit_code = exit_code;
  }
  report.stop_signal = (*supervisor)->stop_signal();
  Report(report, options.supervisor);
  if (health != nullptr) health->Shutdown();
  return exit_code;
}

}  // namespace distjob
