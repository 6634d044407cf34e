#include "agent/env_command.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/barrier.h"
#include "agent/cli/run_flags.h"
#include "agent/exit_codes.h"
#include "agent/mpi_launcher.h"
#include "agent/mpi_plan.h"
#include "agent/outer_agent.h"
#include "agent/worker_env.h"
#include "common/json.h"
#include "common/logging.h"
#include "launchers/worker_command.h"
#include "observability/trainer_status.h"
#include "rendezvous/rendezvous_kind.h"
#include "supervisor/device_fence.h"

namespace distjob {
namespace {

constexpr char kPlaceholder[] = "distjob-agent-env-placeholder";

// The source of a torchrun option, for --explain.
std::string LaunchSource(const std::vector<std::string>& args,
                         const EnvMap& env, const std::string& flag,
                         const std::string& pet) {
  std::string underscored = flag;
  for (char& c : underscored) {
    if (c == '-') c = '_';
  }
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "--" + flag || a == "--" + underscored ||
        absl::StartsWith(a, "--" + flag + "=") ||
        absl::StartsWith(a, "--" + underscored + "=")) {
      return "flag --" + flag;
    }
  }
  if (Lookup(env, pet)) return "env " + pet;
  return "default";
}

// What `run` does with stores beyond the workers' environment: whether
// the start barrier runs (and why not), and what the job's token (never
// shown) is presented to, so a manifest that mounts a token Secret or
// promises a barrier can be checked against the agent's own plan.
Json StoresJson(const JobEnv& job, const RunOptions& options,
                const LaunchOptions& launch) {
  RunOptions effective = options;
  effective.launch = launch;
  const BarrierPlan barrier = PlanBarrier(job, effective);
  Json out;
  out["barrier"] = {{"runs", barrier.run}};
  if (barrier.run) {
    out["barrier"]["host"] = barrier.host_pod;
    out["barrier"]["pods"] = barrier.pods.size();
  } else {
    out["barrier"]["why_not"] = barrier.skip_reason;
  }
  Json used_by = Json::array();
  if (ChooseRendezvous(launch.standalone, launch.max_nodes,
                       launch.rdzv_backend) == RendezvousKind::kDynamic) {
    used_by.push_back("rendezvous");
  }
  if (barrier.run) used_by.push_back("start barrier");
  out["token"] = {{"loaded", !options.security.token.empty()},
                  {"used_by", std::move(used_by)}};
  return out;
}

// `env`'s own options, taken out of the arguments before run's parser
// reads the rest.
struct EnvArgs {
  bool json = false;
  bool explain = false;
  // Whether the arguments had a `--` (a command, possibly empty).
  bool in_command = false;
  // Run's options and the command, with a placeholder command so that
  // run's parser accepts them.
  std::vector<std::string> run_args;
};

bool AsksForHelp(const std::vector<std::string>& raw_args) {
  for (const std::string& a : raw_args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

EnvArgs SplitEnvArgs(const std::vector<std::string>& raw_args) {
  EnvArgs out;
  for (const std::string& a : raw_args) {
    if (!out.in_command && a == "--json") {
      out.json = true;
    } else if (!out.in_command && a == "--explain") {
      out.explain = true;
    } else {
      if (a == "--") out.in_command = true;
      out.run_args.push_back(a);
    }
  }
  if (!out.in_command) {
    // The command is optional here; run's parser wants one.
    out.run_args.push_back("--");
  }
  out.run_args.push_back(kPlaceholder);
  return out;
}

// The command as given, without what SplitEnvArgs added for run's parser.
void DropPlaceholders(const EnvArgs& args, std::vector<std::string>* cmd) {
  if (!cmd->empty() && cmd->back() == kPlaceholder) cmd->pop_back();
  if (!args.in_command && !cmd->empty() && cmd->back() == "--") {
    cmd->pop_back();
  }
}

int PrintError(const absl::Status& status, int exit_code) {
  std::fprintf(stderr, "distjob-agent env: %s\n",
               std::string(status.message()).c_str());
  return exit_code;
}

// Per-attempt files `run` creates under its temporary directory, by
// variable, with why their values are not known before launch.
std::map<std::string, std::string> DecidedAtLaunch(const RunOptions& options,
                                                   bool trainer_status,
                                                   const EnvMap& env) {
  std::map<std::string, std::string> at_launch = {
      {"TORCHELASTIC_ERROR_FILE",
       "decided at launch (a per-attempt file in the agent's temporary "
       "directory)"},
      {kOuterAgentVariable,
       "decided at launch (the socket an agent started by a worker asks to "
       "take over through: one launcher per job)"},
      {kDeviceFenceVariable,
       "decided at launch (the agent process's marker, by which the "
       "GPU-release fence knows its attempts' processes)"},
      {"TORCH_WORKER_SERVER_SOCKET",
       "decided at launch (a per-attempt socket in the agent's temporary "
       "directory, where torch's worker_main() serves the evidence the "
       "agent asks for before a stop)"}};
  if (options.supervisor.hang_timeout > absl::ZeroDuration()) {
    at_launch["DISTJOB_HEARTBEAT_FILE"] =
        "decided at launch (a per-attempt file in the agent's temporary "
        "directory)";
  }
  if (trainer_status) {
    // `run` makes it (mkdtemp) only when it starts the status push.
    at_launch["DISTJOB_PROGRESS_FILE"] = absl::StrCat(
        "decided at launch (", kProgressFileName, " in a directory made as ",
        ProgressDirTemplate(Lookup(env, "TMPDIR").value_or("")),
        ", one per node, for Kubeflow Trainer v2's status push)");
  }
  return at_launch;
}

// Where the workers' store comes from, for --explain.
std::string WorkerStoreSource(const std::vector<std::string>& args,
                              const EnvMap& env, const LaunchOptions& launch) {
  const std::string source =
      LaunchSource(args, env, "worker-store", "DISTJOB_WORKER_STORE");
  if (source != "default") return source;
  return launch.rdzv_backend == RdzvBackend::kStatic && !launch.standalone
             ? "default (the static backend's store is the workers')"
         : launch.torch_disable_shared_store
             ? "env TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"
             : "default (the agent serves the workers' store)";
}

// The source of each variable that torchrun's options decide, for
// --explain: a flag, a PET_ variable, the job's layout or the default.
std::map<std::string, std::string> LaunchSources(
    const std::vector<std::string>& args, const EnvMap& env, const JobEnv& job,
    const LaunchOptions& launch) {
  std::map<std::string, std::string> sources = {
      {"MASTER_ADDR",
       job.pytorch_layout
           ? job.master_source
           : LaunchSource(args, env, "master-addr", "PET_MASTER_ADDR")},
      {"MASTER_PORT",
       job.pytorch_layout && Lookup(env, "MASTER_PORT")
           ? "env MASTER_PORT"
           : LaunchSource(args, env, "master-port", "PET_MASTER_PORT")},
      {"LOCAL_WORLD_SIZE",
       LaunchSource(args, env, "nproc-per-node", "PET_NPROC_PER_NODE")},
      {"TORCHELASTIC_RUN_ID",
       LaunchSource(args, env, "rdzv-id", "PET_RDZV_ID")},
      {"ROLE_NAME", LaunchSource(args, env, "role", "PET_ROLE")},
      {"TORCHELASTIC_MAX_RESTARTS",
       LaunchSource(args, env, "max-restarts", "PET_MAX_RESTARTS")},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE",
       LaunchSource(args, env, "signals-to-handle", "PET_SIGNALS_TO_HANDLE")},
  };
  sources["TORCHELASTIC_USE_AGENT_STORE"] =
      WorkerStoreSource(args, env, launch);
  const std::string rank_source =
      !job.layout_rank_source.empty() ? job.layout_rank_source
      : job.pytorch_layout
          ? absl::StrCat("task ", job.identity.id.task, " index ",
                         job.identity.id.index)
          : LaunchSource(args, env, "node-rank", "PET_NODE_RANK");
  for (const char* k : {"GROUP_RANK", "RANK", "ROLE_RANK"}) {
    sources[k] = rank_source;
  }
  for (const char* k : {"WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"}) {
    sources[k] =
        !job.layout_size_source.empty() ? job.layout_size_source
        : job.pytorch_layout
            ? std::string(PeerSourceName(job.cluster.source)) + " peers"
            : LaunchSource(args, env, "nnodes", "PET_NNODES");
  }
  return sources;
}

// What `env` prints: each local worker's environment as `run` would build
// it, as sourceable text or one JSON document.
class EnvReport {
 public:
  EnvReport(const EnvArgs& args, const RunOptions& options, const JobEnv& job,
            const LaunchOptions& launch, const EnvMap& env, bool trainer_status)
      : args_(args),
        options_(options),
        job_(job),
        launch_(launch),
        env_(env),
        round_(PlanRound(launch)) {
    const auto at_launch = DecidedAtLaunch(options, trainer_status, env);
    command_.module = launch.module;
    command_.no_python = launch.no_python;
    command_.python = Lookup(env, "PYTHON_EXEC").value_or("python3");
    sources_ = LaunchSources(args.run_args, env, job, launch);
    // Undecided values: the reason is their source.
    pending_ = round_.undecided;
    for (const auto& [k, why] : at_launch) pending_[k] = why;
  }

  std::string Render() const {
    std::string out;
    Json doc;
    doc["framework"] = job_.framework;
    // Always an object (empty job/task, index -1 when nothing identified
    // this pod), so consumers need not special-case a plain torchrun job.
    doc["identity"] = {{"job", job_.identity.id.job},
                       {"task", job_.identity.id.task},
                       {"index", job_.identity.id.index}};
    if (!job_.controller.empty()) AddController(&doc, &out);
    Json workers = Json::array();
    for (int local_rank = 0; local_rank < launch_.nproc; ++local_rank) {
      const auto changed = Changed(local_rank);
      if (args_.json) {
        workers.push_back(WorkerJson(local_rank, changed));
      } else {
        AppendWorkerText(local_rank, changed, &out);
      }
    }
    if (!args_.json) return out;
    doc["workers"] = std::move(workers);
    const Json stores = StoresJson(job_, options_, launch_);
    doc["barrier"] = stores["barrier"];
    doc["token"] = stores["token"];
    return DumpJson(doc) + "\n";
  }

 private:
  // Which controller placed the pod, and its place in the rank order of
  // a c10d/etcd round (null: none).
  void AddController(Json* doc, std::string* out) const {
    (*doc)["controller"] = {
        {"name", job_.controller},
        {"pod_index",
         job_.pod_index.empty() ? Json(nullptr) : Json(job_.pod_index)}};
    if (args_.explain) {
      (*doc)["controller"]["pod_index_source"] = job_.pod_index_source;
    }
    if (args_.json) return;
    absl::StrAppend(out, "# controller ", job_.controller, ", pod index ",
                    job_.pod_index.empty() ? "none" : job_.pod_index);
    if (args_.explain && !job_.pod_index.empty()) {
      absl::StrAppend(out, "  # ", job_.pod_index_source);
    }
    *out += "\n";
  }

  // The decided variables of one worker that differ from the agent's own
  // environment.
  std::map<std::string, std::string> Changed(int local_rank) const {
    const EnvMap full =
        BuildWorkerEnv(job_, round_.group, local_rank, env_, WorkerFiles{});
    std::map<std::string, std::string> changed;
    for (const auto& [k, v] : full) {
      if (pending_.count(k)) continue;
      auto inherited = Lookup(env_, k);
      if (!inherited.has_value() || *inherited != v) changed[k] = v;
    }
    return changed;
  }

  std::string SourceOf(const std::string& k) const {
    if (auto it = job_.extra.sources.find(k); it != job_.extra.sources.end()) {
      return it->second;
    }
    if (auto it = sources_.find(k); it != sources_.end()) return it->second;
    return "default";
  }

  Json WorkerJson(int local_rank,
                  const std::map<std::string, std::string>& changed) const {
    Json worker;
    worker["local_rank"] = local_rank;
    worker["argv"] = options_.command.empty()
                         ? std::vector<std::string>{}
                         : WorkerArgv(options_.command, command_, local_rank);
    // Sorted by name, decided or not: an undecided value is null in
    // "env" and its reason is in "undecided".
    std::map<std::string, Json> env_items;
    Json sources = Json::object(), undecided = Json::object();
    for (const auto& [k, v] : changed) {
      env_items[k] = v;
      sources[k] = SourceOf(k);
    }
    for (const auto& [k, why] : pending_) {
      env_items[k] = nullptr;
      undecided[k] = why;
    }
    Json env_json = Json::object();
    for (auto& [k, v] : env_items) env_json[k] = std::move(v);
    worker["env"] = std::move(env_json);
    worker["undecided"] = std::move(undecided);
    if (args_.explain) worker["sources"] = std::move(sources);
    return worker;
  }

  void AppendWorkerText(int local_rank,
                        const std::map<std::string, std::string>& changed,
                        std::string* out) const {
    absl::StrAppend(out, "# local_rank ", local_rank, "\n");
    // Commented out, so that the output can still be sourced; first, so
    // that the lines stay sorted.
    for (const auto& [k, why] : pending_) {
      absl::StrAppend(out, "# ", k, ": ", why, "\n");
    }
    for (const auto& [k, v] : changed) {
      absl::StrAppend(out, k, "=", v);
      if (args_.explain) absl::StrAppend(out, "  # ", SourceOf(k));
      *out += "\n";
    }
  }

  const EnvArgs& args_;
  const RunOptions& options_;
  const JobEnv& job_;
  const LaunchOptions& launch_;
  const EnvMap& env_;
  const WorkerRound round_;
  WorkerCommandOptions command_;
  std::map<std::string, std::string> sources_;
  std::map<std::string, std::string> pending_;
};

const char* MpiRoleName(MpiRole role) {
  return role == MpiRole::kWorker ? "worker" : "launcher";
}

// An MPI pod's report: its role and where it came from; for the launcher,
// the hosts mpirun will reach and where they are named, and what it sets
// for mpirun (its workers' environment is mpirun's to build).
absl::StatusOr<std::string> RenderMpi(const EnvArgs& args,
                                      const RunOptions& options,
                                      const EnvMap& env, const MpiPlan& plan) {
  Json mpi = {{"role", MpiRoleName(plan.role)}};
  std::string out = absl::StrCat("# MPI ", MpiRoleName(plan.role));
  if (args.explain) {
    mpi["role_source"] = plan.role_source;
    absl::StrAppend(&out, "  # ", plan.role_source);
  }
  out += "\n";
  if (plan.role == MpiRole::kWorker) {
    mpi["spawn_server"] =
        absl::StrCat(options.mpi.spawn_host, " port ", options.mpi.spawn_port);
    absl::StrAppend(&out, "# serves mpirun's spawns on ",
                    mpi["spawn_server"].get<std::string>(), "\n");
  } else {
    auto hosts = MpiHosts(options.command, env, plan);
    if (!hosts.ok()) return hosts.status();
    const MpirunEnv set = PlanMpirunEnv(options, env, *hosts);
    mpi["hosts"] = hosts->hosts;
    mpi["hostfile_written"] = hosts->from_peers;
    mpi["env"] = set.env;
    mpi["undecided"] = set.undecided;
    absl::StrAppend(&out, "# hosts ", absl::StrJoin(hosts->hosts, ","));
    if (args.explain) {
      mpi["hosts_source"] = hosts->origin;
      mpi["sources"] = set.sources;
      absl::StrAppend(&out, "  # ",
                      hosts->origin.empty() ? "none named" : hosts->origin);
    }
    out += "\n";
    for (const auto& [k, why] : set.undecided) {
      absl::StrAppend(&out, "# ", k, ": ", why, "\n");
    }
    for (const auto& [k, v] : set.env) {
      absl::StrAppend(&out, k, "=", v);
      if (args.explain) absl::StrAppend(&out, "  # ", set.sources.at(k));
      out += "\n";
    }
  }
  if (!args.json) return out;
  Json doc = {{"framework", "mpi"}, {"mpi", std::move(mpi)}};
  // What StoresJson says of every other pod: mpirun starts the ranks, so
  // no start barrier; the job's token is what a worker's spawn server
  // checks and the launcher's rsh presents.
  doc["barrier"] = {{"runs", false},
                    {"why_not", "an MPI job: mpirun starts the ranks"}};
  doc["token"] = {
      {"loaded", !options.security.token.empty()},
      {"used_by", {plan.role == MpiRole::kWorker ? "spawn server" : "rsh"}}};
  return DumpJson(doc) + "\n";
}

// An MPI pod's plan: a role the options gave, over --peers alone (as
// `run` follows it, before any discovery), else discovery's.
absl::StatusOr<MpiPlan> EnvMpiPlan(const RunOptions& options, const EnvMap& env,
                                   const JobEnv* job) {
  // `env` needs no command; the plan's check for one is `run`'s.
  RunOptions with_command = options;
  if (with_command.command.empty()) with_command.command = {kPlaceholder};
  if (job == nullptr) return PlanExplicitMpi(with_command, env);
  return PlanMpi(with_command, *job, env);
}

int PrintMpi(const EnvArgs& args, const RunOptions& options, const EnvMap& env,
             const MpiPlan& plan) {
  auto text = RenderMpi(args, options, env, plan);
  if (!text.ok()) return PrintError(text.status(), kExitBadConfig);
  std::fputs(text->c_str(), stdout);
  return 0;
}

}  // namespace

std::string EnvHelp() {
  std::string help =
      "Usage: distjob-agent env [options] [--json] [--explain] [--] "
      "[COMMAND [ARGS...]]\n\n"
      "Prints the environment (and argv) `run` would give each local worker "
      "with the same options and environment, and launches nothing. Values "
      "only the rendezvous decides (an elastic job's ranks and sizes, a "
      "one-node job's free MASTER_PORT) are shown as undecided, with why.\n"
      "  --json\n      One JSON object: framework, identity, and per worker "
      "local_rank, argv, env (an undecided value is null) and undecided "
      "(variable: why); barrier (whether `run` holds the workers at the "
      "start barrier: runs, host and pods, or why_not) and token (loaded, "
      "and used_by: rendezvous, start barrier; an MPI pod's spawn server "
      "or rsh); an MPI pod has mpi (role, hosts, what mpirun is given) "
      "in place of workers.\n"
      "  --explain\n      Say where each value came from.\n"
      "  -h, --help\n      Show this help.\n\n"
      "Run's options that env reads:\n";
  // Run's option list, without run's usage paragraph and help line.
  std::string run = RunHelp();
  const std::string options_header = "\n\nOptions:\n";
  if (const size_t at = run.find(options_header); at != std::string::npos) {
    run.erase(0, at + options_header.size());
  }
  const std::string help_line = "  -h, --help\n      Show this help.\n";
  if (absl::EndsWith(run, help_line)) run.resize(run.size() - help_line.size());
  return help + run;
}

int EnvCommand(const std::vector<std::string>& raw_args, const EnvMap& env) {
  if (AsksForHelp(raw_args)) {
    std::fputs(EnvHelp().c_str(), stdout);
    return 0;
  }
  const EnvArgs args = SplitEnvArgs(raw_args);
  auto options = ParseRunOptions(args.run_args, env);
  if (!options.ok()) return PrintError(options.status(), kExitBadConfig);
  InitLogging(options->log_level);
  DropPlaceholders(args, &options->command);
  // As `run`: a bad Trainer v2 status endpoint is exit 2 before discovery.
  std::string trainer_warning;
  auto trainer = TrainerStatusConfigFromEnv(env, &trainer_warning);
  if (!trainer_warning.empty()) DJ_LOG_WARNING("{}", trainer_warning);
  if (!trainer.ok()) return PrintError(trainer.status(), kExitBadConfig);
  if (options->mpi.role != MpiRole::kNone) {
    auto mpi = EnvMpiPlan(*options, env, nullptr);
    if (!mpi.ok()) return PrintError(mpi.status(), kExitBadConfig);
    return PrintMpi(args, *options, env, *mpi);
  }
  auto job = ResolveJob(options->discovery, env);
  if (!job.ok()) return PrintError(job.status(), ExitCodeFor(job.status()));
  auto mpi = EnvMpiPlan(*options, env, &*job);
  if (!mpi.ok()) return PrintError(mpi.status(), kExitBadConfig);
  if (mpi->role != MpiRole::kNone) return PrintMpi(args, *options, env, *mpi);
  const LaunchOptions launch = EffectiveLaunch(*job, options->launch);
  const EnvReport report(args, *options, *job, launch, env,
                         trainer->has_value());
  std::fputs(report.Render().c_str(), stdout);
  return 0;
}

}  // namespace distjob
