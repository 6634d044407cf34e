#include "agent/cli/run_flags.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/cli/discovery_flags.h"
#include "agent/cli/mpi_flags.h"
#include "agent/cli/observability_flags.h"
#include "agent/cli/preflight_flags.h"
#include "agent/cli/security_flags.h"
#include "agent/cli/supervisor_flags.h"
#include "agent/cli/torchrun_flags.h"
#include "common/duration.h"
#include "common/environment.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/text.h"
#include "discovery/accelerators.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/pem_files.h"
#include "supervisor/signal_names.h"
#include "supervisor/worker_logs.h"

namespace distjob {
namespace {

int CountCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// An integer in [1, 4096] or a device kind (checked, not yet counted: that
// waits until every flag is read).
absl::StatusOr<int> ParseNprocValue(absl::string_view v) {
  if (v == "cpu" || v == "gpu" || v == "cuda" || v == "xpu" || v == "auto") {
    return 0;
  }
  auto n = ParseInt(v, 1, 4096);
  if (!n.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", v,
                     "' is not an integer in [1, 4096], cpu, gpu or auto (or "
                     "a device type: cuda, xpu)"));
  }
  return *n;
}

MpiRole MpiRoleOf(const RunOptions& options, const EnvMap& env) {
  return ChooseMpiRole(options.discovery.framework == Framework::kMpi,
                       options.discovery.framework == Framework::kAuto,
                       options.launch.role, env);
}

// An MPI worker serves the launcher's commands instead of running its own.
bool IsMpiWorkerRole(const RunOptions& options) {
  return options.mpi.role == MpiRole::kWorker;
}

// A Volcano MPI worker's pod may have no command either; whether this pod
// is one, discovery says (agent/mpi_plan.h checks the command again then).
absl::Status CheckCommandGiven(const RunOptions& options, const EnvMap& env) {
  if (!options.command.empty() || IsMpiWorkerRole(options)) {
    return absl::OkStatus();
  }
  if (options.discovery.framework == Framework::kAuto &&
      VolcanoMpiWorkersVisible(options.mpi, options.discovery.volcano_dir,
                               env)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "no command to run; usage: distjob-agent run [options] [--] COMMAND "
      "[ARGS...]");
}

// The spawn server runs whatever its callers ask: never without a way to
// tell the job's launcher from anyone else on the pod network.
absl::Status CheckMpiWorkerSecurity(const RunOptions& options) {
  if (!IsMpiWorkerRole(options) || !options.security.token.empty() ||
      !options.security.ca_pem.empty()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "--framework mpi --role worker serves commands to its callers: give "
      "the job's token (--rdzv-token-file or DISTJOB_RDZV_TOKEN) or mutual "
      "TLS (--rdzv-tls-cert, --rdzv-tls-key and --rdzv-tls-ca)");
}

// ROLE_NAME, a store key part and a log prefix: one short printable word
// (torch's role names are Python identifiers).
absl::Status CheckRole(const std::string& role) {
  bool printable = !role.empty();
  for (const char c : role) printable = printable && c >= 0x21 && c <= 0x7e;
  if (printable && role.size() <= kMaxRoleBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--role ", QuoteForMessage(role), ": give 1 to ",
                   kMaxRoleBytes, " printable ASCII characters, no spaces"));
}

// The etcd backend's TLS files, parsed now: one that is not PEM would
// otherwise show only as handshakes failing until the join timeout.
absl::Status CheckEtcdTlsFiles(const EtcdStoreOptions& etcd) {
  if (!etcd.ca_cert.empty()) {
    auto ca = ReadPemCertificates("--rdzv-conf ca_cert", etcd.ca_cert);
    if (!ca.ok()) return ca.status();
  }
  if (etcd.cert.empty()) return absl::OkStatus();
  auto cert = ReadPemCertificates("--rdzv-conf cert", etcd.cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPemPrivateKey("--rdzv-conf key", etcd.key);
  if (!key.ok()) return key.status();
  return CheckKeyMatchesCertificate(*cert, "--rdzv-conf cert", etcd.cert, *key,
                                    "--rdzv-conf key", etcd.key);
}

}  // namespace

absl::Status ParseNnodes(absl::string_view value, int* min_nodes,
                         int* max_nodes) {
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  int lo = 0, hi = 0;
  bool ok = false;
  if (parts.size() == 1) {
    ok = absl::SimpleAtoi(parts[0], &lo);
    hi = lo;
  } else if (parts.size() == 2) {
    ok = absl::SimpleAtoi(parts[0], &lo) && absl::SimpleAtoi(parts[1], &hi);
  }
  if (!ok || lo <= 0 || hi < lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", value, "' is not N or MIN:MAX with 0 < MIN <= MAX"));
  }
  *min_nodes = lo;
  *max_nodes = hi;
  return absl::OkStatus();
}

absl::StatusOr<int> ResolveNprocPerNode(absl::string_view value,
                                        const EnvMap& env,
                                        const std::string& root) {
  if (value == "cpu") return CountCpus();
  if (value == "gpu" || value == "cuda" || value == "xpu" || value == "auto") {
    const AcceleratorCounts counts = CountAccelerators(root, env);
    // As torchrun: auto takes CUDA (NVIDIA, or AMD under ROCm), then XPU,
    // then the CPUs.
    if (value == "auto") {
      if (counts.cuda() > 0) return counts.cuda();
      if (counts.intel > 0) return counts.intel;
      return CountCpus();
    }
    const int n = value == "xpu" ? counts.intel : counts.cuda();
    if (n == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--nproc-per-node ", value, ": ",
          value == "xpu" ? "no Intel GPU is visible"
                         : "no NVIDIA GPU or AMD GPU is visible",
          " on this node (after *_VISIBLE_DEVICES / ZE_AFFINITY_MASK); use "
          "an integer, cpu or auto"));
    }
    return n;
  }
  auto n = ParseNprocValue(value);
  if (!n.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc-per-node: ", n.status().message()));
  }
  return *n;
}

absl::StatusOr<int> ResolveNprocPerNode(absl::string_view value,
                                        const EnvMap& env) {
  return ResolveNprocPerNode(value, env, "/");
}

void AddTorchrunFlags(FlagSet* flags, RunOptions* options) {
  LaunchOptions* o = &options->launch;
  flags->Add(TorchrunFlag(
      "nnodes", "N|MIN:MAX", "Number of nodes, or the elastic range.",
      [o](absl::string_view v, absl::string_view) {
        absl::Status s = ParseNnodes(v, &o->min_nodes, &o->max_nodes);
        if (s.ok()) o->nnodes = std::string(v);
        return s;
      }));
  flags->Add(
      TorchrunFlag("nproc-per-node", "N|cpu|gpu|xpu|auto",
                   "Workers on this node (default 1); gpu/cuda: NVIDIA or AMD "
                   "GPUs, xpu: Intel GPUs, auto: GPUs if any, else CPUs.",
                   [o](absl::string_view v, absl::string_view) {
                     auto n = ParseNprocValue(v);
                     if (!n.ok()) return n.status();
                     o->nproc_per_node = std::string(v);
                     return absl::OkStatus();
                   }));
  flags->Add(TorchrunFlag("rdzv-backend", "static|c10d|etcd|etcd-v3",
                          "Rendezvous backend (default static).",
                          SetParsed(&o->rdzv_backend, ParseRdzvBackend)));
  flags->Add(TorchrunFlag("rdzv-endpoint", "HOST[:PORT]",
                          "Rendezvous store endpoint (c10d default port "
                          "29400).",
                          SetString(&o->rdzv_endpoint)));
  flags->Add(TorchrunFlag(
      "rdzv-id", "ID", "Job id shared by all nodes (default none).",
      [o](absl::string_view v, absl::string_view) {
        // Every store key carries it (rdzv/<id>/...): past the store's key
        // limit each write would fail, and be retried, for the whole join
        // timeout.
        const bool printable = std::all_of(v.begin(), v.end(), [](char c) {
          return c > ' ' && c < 0x7f && c != '/';
        });
        if (v.empty() || v.size() > kMaxRdzvIdBytes || !printable) {
          return absl::InvalidArgumentError(absl::StrCat(
              QuoteForMessage(v), " is not 1-", kMaxRdzvIdBytes,
              " printable ASCII characters without spaces or '/'"));
        }
        o->rdzv_id = std::string(v);
        return absl::OkStatus();
      }));
  flags->Add(TorchrunFlag("rdzv-conf", "K=V[,K=V...]",
                          "Rendezvous settings: join_timeout, "
                          "last_call_timeout, close_timeout, "
                          "heartbeat_timeout, keep_alive_interval, "
                          "keep_alive_max_attempt, read_timeout, is_host.",
                          [o](absl::string_view v, absl::string_view) {
                            std::vector<std::string> notices;
                            auto config =
                                ParseRdzvConf(std::string(v), &notices);
                            if (!config.ok()) {
                              // The flag parser names the option already.
                              absl::string_view message =
                                  config.status().message();
                              absl::ConsumePrefix(&message, "--rdzv-conf: ");
                              absl::ConsumePrefix(&message, "--rdzv-conf ");
                              return absl::InvalidArgumentError(message);
                            }
                            for (const std::string& notice : notices) {
                              DJ_LOG_INFO("{}", notice);
                            }
                            o->rdzv_conf = std::string(v);
                            o->rdzv_config = *config;
                            return absl::OkStatus();
                          }));
  flags->Add(TorchrunFlag("standalone", "",
                          "Single-node job: a local rendezvous on a free "
                          "port with a fresh run id.",
                          SetBool(&o->standalone), /*is_bool=*/true));
  flags->Add(TorchrunFlag("max-restarts", "N",
                          "Restarts of the worker group after a retryable "
                          "failure (default 0).",
                          SetInt(&o->max_restarts, 0, 1000000)));
  flags->Add(TorchrunFlag("monitor-interval", "SECONDS",
                          "Accepted for torchrun compatibility; the agent is "
                          "event-driven and does not poll.",
                          SetDuration(&o->monitor_interval)));
  flags->Add(
      TorchrunFlag("start-method", "spawn|fork|forkserver",
                   "Accepted for torchrun compatibility (binaries are "
                   "always exec'd).",
                   [o](absl::string_view v, absl::string_view) {
                     if (v != "spawn" && v != "fork" && v != "forkserver") {
                       return absl::InvalidArgumentError(absl::StrCat(
                           "'", v, "' is not one of spawn, fork, forkserver"));
                     }
                     o->start_method = std::string(v);
                     return absl::OkStatus();
                   }));
  flags->Add(TorchrunFlag("role", "NAME",
                          "Worker role, exported as ROLE_NAME (default "
                          "'default').",
                          SetString(&o->role)));
  flags->Add(TorchrunFlag("module", "",
                          "Run the script as a Python module (python -u -m).",
                          SetBool(&o->module), true, "m"));
  flags->Add(TorchrunFlag("no-python", "",
                          "Execute the command directly, without python.",
                          SetBool(&o->no_python), true));
  flags->Add(TorchrunFlag("run-path", "",
                          "Accepted for torchrun compatibility; same as "
                          "running the script with python.",
                          SetBool(&o->run_path), true));
  flags->Add(TorchrunFlag("log-dir", "DIR",
                          "Base directory for per-attempt worker logs.",
                          SetString(&o->log_dir)));
  flags->Add(TorchrunFlag("redirects", "0|1|2|3|RANK:MASK,...",
                          "Redirect worker stdout (1), stderr (2) or both "
                          "(3) to files under --log-dir.",
                          SetString(&o->redirects_spec), false, "r"));
  flags->Add(TorchrunFlag("tee", "0|1|2|3|RANK:MASK,...",
                          "Like --redirects, and also copy the lines to the "
                          "console with a [role rank]: prefix.",
                          SetString(&o->tee_spec), false, "t"));
  flags->Add(TorchrunFlag(
      "local-ranks-filter", "R[,R...]",
      "Only these local ranks reach the console.",
      [o](absl::string_view v, absl::string_view) {
        std::set<int> ranks;
        for (absl::string_view r : absl::StrSplit(v, ',', absl::SkipEmpty())) {
          auto rank = ParseInt(absl::StripAsciiWhitespace(r), 0, 1 << 20);
          if (!rank.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("'", v,
                             "' is not a comma-separated list of "
                             "local ranks (e.g. 0,3)"));
          }
          ranks.insert(*rank);
        }
        o->local_ranks_filter = std::move(ranks);
        return absl::OkStatus();
      }));
  flags->Add(TorchrunFlag("node-rank", "N",
                          "This node's rank (static backend only).",
                          SetInt(&o->node_rank, 0, 1 << 30)));
  flags->Add(TorchrunFlag("master-addr", "HOST",
                          "Rank 0's address (static backend only; default "
                          "127.0.0.1).",
                          SetHostName(&o->master_addr)));
  flags->Add(TorchrunFlag("master-port", "PORT",
                          "Rank 0's port (static backend; a one-node "
                          "job's workers' store listens there; default "
                          "29500).",
                          [o](absl::string_view v, absl::string_view flag) {
                            o->master_port_given = true;
                            return SetInt(&o->master_port, 1, 65535)(v, flag);
                          }));
  flags->Add(TorchrunFlag("local-addr", "ADDR",
                          "This node's address, used as MASTER_ADDR when it "
                          "is rank 0 (default: its FQDN, as torchrun).",
                          SetHostName(&o->local_addr)));
  flags->Add(TorchrunFlag(
      "signals-to-handle", "SIG[,SIG...]",
      "Signals that stop the job (forwarded, then SIGKILL after "
      "--shutdown-timeout). Default SIGTERM,SIGINT,SIGHUP,SIGQUIT.",
      [options](absl::string_view v, absl::string_view) {
        auto signals = ParseSignalList(v);
        if (!signals.ok()) return signals.status();
        for (int sig : *signals) {
          // SIGKILL and SIGSTOP cannot be caught; SIGCHLD is how the
          // supervisor learns that a worker exited.
          if (sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD) {
            return absl::InvalidArgumentError(absl::StrCat(
                QuoteForMessage(v), ": ", SignalName(sig),
                " cannot be a stop signal; list catchable signals such as "
                "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"));
          }
        }
        options->supervisor.stop_signals = *signals;
        options->launch.signals_to_handle = std::string(v);
        return absl::OkStatus();
      }));
  Flag shutdown = TorchrunFlag(
      "shutdown-timeout", "SECONDS",
      "Grace period from the forwarded stop signal to SIGKILL (default 25s, "
      "below Kubernetes' 30s; 0 kills at once).",
      SetDuration(&options->supervisor.shutdown_timeout));
  shutdown.env = {"PET_SHUTDOWN_TIMEOUT", "DISTJOB_SHUTDOWN_TIMEOUT",
                  "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"};
  flags->Add(std::move(shutdown));
  AddCurrentTorchrunFlags(flags, options);
}

std::string RunHelp() {
  RunOptions unused;
  FlagSet flags(
      "Usage: distjob-agent run [options] [--] COMMAND [ARGS...]\n"
      "       torchrun [options] SCRIPT.py [ARGS...]\n\n"
      "Finds the job's peers, agrees on ranks, launches --nproc-per-node "
      "workers with torchrun's environment and supervises them as PID 1.\n"
      "A COMMAND ending in .py runs as `python3 -u COMMAND` ($PYTHON_EXEC "
      "overrides python3); --no-python runs it as is, -m as a module.");
  AddTorchrunFlags(&flags, &unused);
  AddSupervisorFlags(&flags, &unused);
  AddDiscoveryFlags(&flags, &unused);
  AddObservabilityFlags(&flags, &unused);
  AddPreflightFlags(&flags, &unused.preflight);
  AddSecurityFlags(&flags, &unused.security_files);
  AddHealthTlsFlag(&flags, &unused.outcome.health_tls);
  AddMpiFlags(&flags, &unused.mpi);
  return flags.Help() + "  -h, --help\n      Show this help.\n";
}

namespace {

// The store --rdzv-endpoint and --rdzv-conf name, parsed into `launch`:
// checked here, not where it is used, which is after the DNS wait, the
// start barrier or the rendezvous, minutes into a run.
absl::Status ParseRdzvStore(LaunchOptions* launch) {
  if (launch->rdzv_backend == RdzvBackend::kC10d) {
    auto endpoint = ParseEndpoint(launch->rdzv_endpoint);
    if (!endpoint.ok()) return endpoint.status();
    launch->endpoint = *endpoint;
  }
  if (launch->rdzv_backend == RdzvBackend::kEtcd ||
      launch->rdzv_backend == RdzvBackend::kEtcdV3) {
    // The etcd backend's own keys (etcd_prefix, cert and key together...).
    auto etcd = ParseEtcdOptions(launch->rdzv_endpoint, launch->rdzv_conf,
                                 launch->rdzv_id);
    if (!etcd.ok()) return etcd.status();
    if (absl::Status s = CheckEtcdTlsFiles(*etcd); !s.ok()) return s;
    launch->etcd = *std::move(etcd);
  }
  return absl::OkStatus();
}

// The command line's flags and command, as given.
absl::StatusOr<RunOptions> ParseRunFlags(const std::vector<std::string>& args,
                                         const EnvMap& env) {
  RunOptions options;
  FlagSet flags("");
  AddTorchrunFlags(&flags, &options);
  AddSupervisorFlags(&flags, &options);
  AddDiscoveryFlags(&flags, &options);
  AddObservabilityFlags(&flags, &options);
  AddPreflightFlags(&flags, &options.preflight);
  AddSecurityFlags(&flags, &options.security_files);
  AddHealthTlsFlag(&flags, &options.outcome.health_tls);
  AddMpiFlags(&flags, &options.mpi);
  auto command = flags.Parse(args, env);
  if (!command.ok()) return command.status();
  options.command = std::move(*command);
  return options;
}

// The command and how it runs: -m or --no-python, the MPI role, the role
// name, the workers per node, and what the kernel passes to exec.
absl::Status CheckCommandLine(const EnvMap& env, RunOptions* options) {
  LaunchOptions& launch = options->launch;
  if (launch.module && launch.no_python) {
    return absl::InvalidArgumentError(
        "-m/--module and --no-python cannot be used together");
  }
  options->mpi.role = MpiRoleOf(*options, env);
  if (absl::Status s = CheckCommandGiven(*options, env); !s.ok()) return s;
  if (absl::Status s = CheckRole(launch.role); !s.ok()) return s;
  auto nproc = ResolveNprocPerNode(launch.nproc_per_node, env);
  if (!nproc.ok()) return nproc.status();
  launch.nproc = *nproc;
  if (absl::Status s = CheckExecStrings(env, "environment"); !s.ok()) {
    return s;
  }
  for (const std::string& arg : options->command) {
    if (arg.size() + 1 > kMaxExecString) {
      return absl::InvalidArgumentError(absl::StrCat(
          "command argument ", QuoteForMessage(arg), " is longer than the ",
          kMaxExecString, " bytes the kernel passes per argument"));
    }
  }
  return absl::OkStatus();
}

// The round's shape: --standalone's, the workers' shared store, the world
// size, and the rendezvous store.
absl::Status SettleRound(const EnvMap& env, LaunchOptions* launch) {
  if (launch->standalone) {
    // As torchrun: a local c10d rendezvous on a free port, a fresh id, and
    // exactly one node, whatever else was said.
    launch->rdzv_backend = RdzvBackend::kC10d;
    launch->rdzv_endpoint = "localhost:0";
    launch->rdzv_id.clear();
    launch->nnodes = "1:1";
    launch->min_nodes = launch->max_nodes = 1;
  }
  // torch reads only "1" as set (rendezvous/dynamic_rendezvous.py).
  launch->torch_disable_shared_store =
      Lookup(env, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE").value_or("") == "1";
  // WORLD_SIZE and every global rank are ints in the workers' frameworks.
  const int64_t world_size = int64_t{launch->max_nodes} * launch->nproc;
  if (world_size > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes ", launch->nnodes, " x --nproc-per-node ", launch->nproc,
        " = ", world_size, " workers; the world size must stay below 2^31"));
  }
  return ParseRdzvStore(launch);
}

// Read now: a secret or certificate that does not load must end the run
// before anything listens or waits.
absl::Status LoadRunSecurity(const EnvMap& env, RunOptions* options) {
  auto security = LoadSecurity(options->security_files, env);
  if (!security.ok()) return security.status();
  options->security = *std::move(security);
  if (absl::Status s = CheckMpiWorkerSecurity(*options); !s.ok()) return s;
  if (options->outcome.health_tls && !options->security.tls()) {
    return absl::InvalidArgumentError(
        "--health-tls needs --rdzv-tls-cert and --rdzv-tls-key (the "
        "certificate the health server presents)");
  }
  return absl::OkStatus();
}

// --redirects and --tee, per local rank.
absl::Status ParseStreamMasks(LaunchOptions* launch) {
  auto redirects = ParseStreamMask(launch->redirects_spec, launch->nproc);
  if (!redirects.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redirects: ", redirects.status().message()));
  }
  launch->redirects = *std::move(redirects);
  auto tees = ParseStreamMask(launch->tee_spec, launch->nproc);
  if (!tees.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tee: ", tees.status().message()));
  }
  launch->tees = *std::move(tees);
  return absl::OkStatus();
}

// What discovery takes from the torchrun options.
void SetDiscoveryLayout(RunOptions* options) {
  const LaunchOptions& launch = options->launch;
  options->discovery.standalone = launch.standalone;
  // A controller's layout (discovery/k8s_controllers) fills in only what
  // the user left at torchrun's defaults.
  options->discovery.nnodes =
      launch.min_nodes == launch.max_nodes && launch.nnodes != "1:1"
          ? launch.max_nodes
          : 0;
  options->discovery.layout_given =
      launch.standalone || launch.min_nodes != launch.max_nodes ||
      launch.node_rank != 0 || launch.master_addr != "127.0.0.1" ||
      !launch.rdzv_endpoint.empty() ||
      launch.rdzv_backend != RdzvBackend::kStatic;
  options->discovery.master_port = launch.master_port;
}

}  // namespace

absl::StatusOr<RunOptions> ParseRunOptions(const std::vector<std::string>& args,
                                           const EnvMap& env,
                                           const Invocation& invocation) {
  absl::StatusOr<RunOptions> options = ParseRunFlags(args, env);
  if (!options.ok() || !options->launch.print_completion.empty()) {
    return options;
  }
  options->launch.as_torchrun = invocation.as_torchrun;
  options->launch.rdzv_key_suffix = invocation.rdzv_key_suffix;
  if (absl::Status s = CheckPreflightOptions(options->preflight); !s.ok()) {
    return s;
  }
  if (absl::Status s = ResolveFileTimerPath(env, &options->supervisor);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCommandLine(env, &*options); !s.ok()) return s;
  if (absl::Status s = SettleRound(env, &options->launch); !s.ok()) return s;
  if (absl::Status s = LoadRunSecurity(env, &*options); !s.ok()) return s;
  if (absl::Status s = ParseStreamMasks(&options->launch); !s.ok()) return s;
  SetDiscoveryLayout(&*options);
  return options;
}

}  // namespace distjob
