// Everything `distjob-agent run` is told, after flags and environment are
// parsed (agent/cli/run_flags.h) and before anything is resolved against the
// machine or the cluster.
#ifndef DISTJOB_AGENT_CLI_OPTIONS_H_
#define DISTJOB_AGENT_CLI_OPTIONS_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/cli/mpi_flags.h"
#include "common/logging.h"
#include "discovery/job_env.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/store_credentials.h"
#include "supervisor/failure_cause.h"
#include "supervisor/supervisor_options.h"

namespace distjob {

// torchrun's options, same names and defaults (see torchrun --help), each
// already parsed and checked against the others (agent/cli/run_flags.cc): a
// value wrong here fails the start, not a step minutes into the run.
struct LaunchOptions {
  std::string nnodes = "1:1";
  int min_nodes = 1;
  int max_nodes = 1;
  // As given: an integer, cpu, gpu or auto; resolved into `nproc`.
  std::string nproc_per_node = "1";
  int nproc = 1;
  bool standalone = false;
  RdzvBackend rdzv_backend = RdzvBackend::kStatic;
  // As given: the etcd backends take a comma-separated list of URLs.
  std::string rdzv_endpoint;
  // The c10d store's address parsed from rdzv_endpoint (the other backends
  // leave it at localhost)...
  Endpoint endpoint;
  // ...the etcd backends' cluster and own --rdzv-conf keys, parsed from
  // rdzv_endpoint and rdzv_conf (empty for the other backends).
  EtcdStoreOptions etcd;
  std::string rdzv_id = "none";
  // As given (k1=v1,k2=v2), for the etcd backend's own keys...
  std::string rdzv_conf;
  // ...and parsed.
  RdzvConfig rdzv_config;
  int max_restarts = 0;
  absl::Duration monitor_interval = absl::Milliseconds(100);
  std::string start_method = "spawn";  // accepted for compatibility
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  // --redirects/--tee as given (0|1|2|3|RANK:MASK,...), and resolved per
  // local rank once nproc is known: stream bits, 1 stdout, 2 stderr.
  std::string redirects_spec = "0";
  std::string tee_spec = "0";
  std::vector<int> redirects = {0};
  std::vector<int> tees = {0};
  // --local-ranks-filter; empty: every local rank.
  std::set<int> local_ranks_filter;
  // Current torchrun's options (agent/cli/torchrun_flags.cc).
  std::string log_line_prefix_template;
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  bool virtual_local_rank = false;
  // --signals-to-handle as given: 2.x torchrun exports it to its workers
  // as TORCHELASTIC_SIGNALS_TO_HANDLE (the parsed list is the
  // supervisor's stop_signals).
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  // --numa-binding: node, socket, exclusive, core-complex; "" none.
  std::string numa_binding;
  // --print-completion: print this shell's script instead of running.
  std::string print_completion;
  // Invoked under the name torchrun: scripts run with Python, .py or not,
  // and --log-dir gets torchrun's <run_id>_<random>/ level.
  bool as_torchrun = false;
  // Set when this agent took over from an outer agent (agent/outer_agent):
  // its rendezvous keys live under the run id plus this.
  std::string rdzv_key_suffix;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // --master-port (or PET_MASTER_PORT) was given: a one-node job's
  // workers' store listens there (docs/worker-store.md).
  bool master_port_given = false;
  std::string local_addr;
  // The rank order of the dynamic backends: this pod's index from its
  // controller (discovery/) and --rank-order-key; "" when none.
  std::string pod_index;
  std::string rank_order_key;
  // --worker-store / DISTJOB_WORKER_STORE: true `agent` (the agent serves
  // the workers' TCPStore), false `worker` (worker rank 0 hosts it, as
  // torch 1.13); nullopt when not given (WorkerStoreOnAgent decides).
  std::optional<bool> worker_store_agent;
  // Where worker_store_agent came from, as `status` names an opt-out:
  // "--worker-store worker" or "DISTJOB_WORKER_STORE=worker".
  std::string worker_store_setting;
  // TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torchrun's own opt-out.
  bool torch_disable_shared_store = false;
};

// What the agent does with an attempt's outcome: restart policy and
// backoff, the reporting files, the health probes.
struct OutcomeOptions {
  std::string termination_log = "/dev/termination-log";
  // The agent's own torchelastic error file (the root cause, JSON); empty
  // means none. Defaults from TORCHELASTIC_ERROR_FILE like torchrun.
  std::string error_file;
  // Pause between a failed attempt and the next, doubled each restart up
  // to restart_backoff_max.
  absl::Duration restart_backoff = absl::ZeroDuration();
  absl::Duration restart_backoff_max = absl::Seconds(60);
  // Exit-code overrides (supervisor/failure_cause.h).
  std::set<int> permanent_exit_codes;
  std::set<int> retryable_exit_codes;
  // --restart-policy; unset: any when invoked as torchrun (its semantics),
  // else auto (EffectiveRestartPolicy).
  std::optional<RestartPolicy> restart_policy;
  // --progress-file: a file the training updates (e.g. its checkpoint
  // iteration); "" for none. --max-no-progress-restarts: that many
  // consecutive failed attempts without progress (this file, a heartbeat,
  // a FileTimer request) end the job with kExitNoProgress; 0 never does.
  std::string progress_file;
  int max_no_progress_restarts = 0;
  // The GPU-release fence before each restart (agent/device_release.h):
  // how long the previous attempt's holders of a device file get, and
  // whether the agent then stops (retryable) instead of starting anyway.
  // The device files' patterns are the supervisor's (its drain names them).
  absl::Duration device_release_timeout = absl::Seconds(30);
  bool device_release_stop = false;
  // --retryable-error-pattern, each compiled once.
  std::vector<ErrorPattern> retryable_error_patterns;
  // grpc.health.v1 port on all interfaces; 0 = no health server.
  int health_port = 0;
  // --health-tls: serve it with the store's TLS certificate.
  bool health_tls = false;
};

// What the agent shows of the job from outside (agent/cli/observability_flags).
struct ObservabilityOptions {
  // HTTP /metrics, /healthz, /readyz on this port (all interfaces, IPv4 and
  // IPv6); 0 = none.
  int metrics_port = 0;
  // A client silent this long is disconnected.
  absl::Duration metrics_timeout = absl::Seconds(5);
  // PEM certificate and key: --metrics-port speaks HTTPS only.
  std::string metrics_tls_cert;
  std::string metrics_tls_key;
  // TORCHELASTIC_HEALTH_CHECK_PORT: 200 while the workers showed progress
  // within the window, 503 otherwise (agent/progress_health); 0 = none.
  int health_check_port = 0;
  absl::Duration health_progress_window = absl::Seconds(60);
  // The event log: null (none), console or file:PATH.
  std::string event_log_handler = "null";
  // The agent's own lines: text, or one JSON object a line.
  LogFormat log_format = LogFormat::kText;
  // Tee'd worker lines on the console: text, or one JSON object a line.
  LogFormat worker_log_format = LogFormat::kText;
};

// `run --preflight` (agent/cli/preflight_flags): the checks of
// `distjob-agent preflight` before discovery waits. The names and the
// endpoint come from run's own options; these are what run cannot know.
struct RunPreflightOptions {
  bool enabled = false;
  std::vector<std::string> paths;           // --check-path
  std::vector<std::string> writable_paths;  // --check-writable
  std::string health_daemon;                // --health-daemon unix:///PATH
};

struct RunOptions {
  LaunchOptions launch;
  SupervisorOptions supervisor;
  OutcomeOptions outcome;
  DiscoveryOptions discovery;
  ObservabilityOptions observability;
  RunPreflightOptions preflight;
  // The rendezvous store's and start barrier's token and TLS files
  // (agent/cli/security_flags), and what they held once loaded.
  StoreSecurityOptions security_files;
  StoreSecurity security;
  // MPI jobs' spawn servers (--framework mpi).
  MpiOptions mpi;
  LogLevel log_level = LogLevel::kInfo;
  // The worker command as given: training script (or binary) and its args.
  std::vector<std::string> command;
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_OPTIONS_H_
