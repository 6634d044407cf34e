#include "agent/worker_group.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/cli/torchrun_flags.h"
#include "agent/worker_env.h"
#include "common/logging.h"
#include "common/text.h"
#include "launchers/pytorch_env.h"
#include "launchers/worker_command.h"

namespace distjob {
namespace {

// What runs, said once an attempt (docs/cli.md, "What runs"): local rank 0's
// exact argv and the absolute path of its program, the interpreter of a
// Python script: PYTHON_EXEC, else the first python3 on the workers' PATH.
void LogWorkerCommand(const std::vector<std::string>& argv,
                      const EnvMap& worker_env, const EnvMap& agent_env,
                      int attempt) {
  if (argv.empty()) return;
  std::vector<std::string> quoted;
  // Exact, but one line whatever an argument holds.
  for (const std::string& arg : argv) {
    quoted.push_back(QuoteForMessage(arg, 1024));
  }
  const std::string path = Lookup(worker_env, "PATH").value_or("");
  const std::string resolved = ResolveOnPath(argv[0], path);
  std::string source;
  if (Lookup(agent_env, "PYTHON_EXEC") == argv[0]) {
    source = "from PYTHON_EXEC";
  } else if (argv[0].find('/') == std::string::npos) {
    source = "the first on PATH";
  }
  DJ_LOG_INFO("attempt {}: local rank 0 runs [{}]; {} is {}{}", attempt,
              absl::StrJoin(quoted, ", "), QuoteForMessage(argv[0]),
              resolved.empty() ? "not found on PATH" : resolved,
              source.empty() || resolved.empty()
                  ? ""
                  : absl::StrCat(" (", source, ")"));
}

}  // namespace

std::string RunLogDir(const LaunchOptions& launch) {
  if (!launch.as_torchrun || launch.log_dir.empty()) return launch.log_dir;
  // The directory itself must exist before mkdtemp; WorkerLogs::Create
  // reports a --log-dir that cannot be made.
  (void)mkdir(launch.log_dir.c_str(), 0755);
  std::string templ =
      absl::StrCat(launch.log_dir, "/",
                   launch.rdzv_id.empty() ? "none" : launch.rdzv_id, "_XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) return launch.log_dir;
  return templ;
}

std::vector<WorkerSpec> BuildWorkers(const RunOptions& options,
                                     const EnvMap& env, const JobEnv& job,
                                     const RendezvousResult& round,
                                     int restart_count, WorkerLogs& files,
                                     const std::vector<int>& redirects,
                                     const std::vector<int>& tees,
                                     const std::string& progress_file) {
  const LaunchOptions& launch = options.launch;
  PyTorchGroupInfo group = LaunchGroupFields(launch);
  group.group_rank = round.group_rank;
  group.group_world_size = round.group_world_size;
  group.base_rank = round.base_rank;
  group.world_size = round.world_size;
  group.role_base_rank = round.base_rank;
  group.role_world_size = round.world_size;
  group.master_addr = round.master_addr;
  group.master_port = round.master_port;
  group.restart_count = restart_count;
  group.run_id = round.run_id;
  group.use_agent_store = round.use_agent_store;

  WorkerCommandOptions command;
  command.module = launch.module;
  command.no_python = launch.no_python;
  command.always_python = launch.as_torchrun;
  command.python = Lookup(env, "PYTHON_EXEC").value_or("python3");

  const std::vector<NumaBinding> numa = PlanNumaBindings(launch, env);
  std::vector<WorkerSpec> workers;
  for (int local_rank = 0; local_rank < launch.nproc; ++local_rank) {
    WorkerSpec spec;
    spec.local_rank = local_rank;
    spec.process.numa = numa[static_cast<size_t>(local_rank)];
    spec.process.argv = WorkerArgv(options.command, command, local_rank);
    spec.error_file = files.ErrorFile(restart_count, local_rank);
    if (options.supervisor.hang_timeout > absl::ZeroDuration() &&
        files.enabled()) {
      spec.heartbeat_file = files.HeartbeatFile(restart_count, local_rank);
    }
    spec.server_socket = files.ServerSocket(restart_count, local_rank);
    spec.process.env = BuildWorkerEnv(
        job, group, local_rank, env,
        {spec.error_file, spec.heartbeat_file, progress_file,
         options.supervisor.file_timer_path, spec.server_socket});
    if (local_rank == 0) {
      LogWorkerCommand(spec.process.argv, spec.process.env, env, restart_count);
    }
    const StreamPlan plan =
        PlanStreams(redirects[static_cast<size_t>(local_rank)],
                    tees[static_cast<size_t>(local_rank)],
                    RankShown(launch.local_ranks_filter, local_rank));
    // With a log directory stderr always goes through the agent, which
    // keeps its tail: why a worker failed (WorkerLogs::StderrTail).
    if ((plan.redirect | plan.tee | plan.discard) != 0 || files.enabled()) {
      auto policy = [&](int bit) {
        const int rank = round.base_rank + local_rank;
        LinePolicy p = MakeLinePolicy(launch, local_rank, rank, bit);
        if (options.observability.worker_log_format == LogFormat::kJson) {
          p.json_fields = WorkerLineJsonFields(rank, local_rank,
                                               bit == 1 ? "stdout" : "stderr");
        }
        return p;
      };
      auto streams = files.OpenStreams(restart_count, local_rank, plan,
                                       policy(1), policy(2));
      if (streams.ok()) {
        spec.process.stdout_fd = streams->stdout_fd;
        spec.process.stderr_fd = streams->stderr_fd;
      } else {
        DJ_LOG_WARNING("worker output stays on the console: {}",
                       streams.status());
      }
    }
    workers.push_back(std::move(spec));
  }
  return workers;
}

}  // namespace distjob
