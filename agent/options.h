// Everything `distjob-agent run` is told, after flags and environment are
// parsed (agent/run_flags.h) and before anything is resolved against the
// machine or the cluster.
#ifndef DISTJOB_AGENT_OPTIONS_H_
#define DISTJOB_AGENT_OPTIONS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/logging.h"
#include "supervisor/supervisor_options.h"

namespace distjob {

// torchrun's options, same names and defaults (see torchrun --help).
struct LaunchOptions {
  std::string nnodes = "1:1";
  int min_nodes = 1;
  int max_nodes = 1;
  // As given: an integer, cpu, gpu or auto; resolved into `nproc`.
  std::string nproc_per_node = "1";
  int nproc = 1;
  bool standalone = false;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;  // k1=v1,k2=v2 as given
  int max_restarts = 0;
  absl::Duration monitor_interval = absl::Milliseconds(100);
  std::string start_method = "spawn";  // accepted for compatibility
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string local_addr;
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
  // Exit-code class overrides (DESIGN.md 3.5).
  std::set<int> permanent_exit_codes;
  std::set<int> retryable_exit_codes;
  bool restart_on_any_failure = false;  // --restart-policy any
  // grpc.health.v1 port on all interfaces; 0 = no health server.
  int health_port = 0;
};

// Who this pod is and who its peers are (agent/discovery_flags.cc), and the
// framework environment built from that.
struct DiscoveryOptions {
  std::string job_name;
  std::string task;
  int task_index = -1;   // -1: not given
  std::string hostname;  // empty: gethostname()
  std::string volcano_dir = "/etc/volcano";
  std::string replicas;  // Kubeflow: worker=4,ps=2
  std::string k8s_namespace;
  std::string cluster_domain;
  std::string peers;  // task=h1,h2;task2=h3
  std::string peers_file;
  std::vector<std::string> dns_servers;
  absl::Duration dns_timeout = absl::Minutes(5);
  bool no_barrier = false;
  // The start barrier's store: hosted by the cluster's first pod on this
  // port; a pod missing after barrier_timeout fails the job retryably.
  int barrier_port = 29401;
  absl::Duration barrier_timeout = absl::Seconds(600);
  std::string framework = "auto";
  int tf_port = 2222;
  std::string tf_roles;
  bool tf_no_evaluator = false;
  bool override_tf_config = false;
  int mxnet_port = 9091;
};

struct RunOptions {
  LaunchOptions launch;
  SupervisorOptions supervisor;
  OutcomeOptions outcome;
  DiscoveryOptions discovery;
  LogLevel log_level = LogLevel::kInfo;
  // The worker command as given: training script (or binary) and its args.
  std::vector<std::string> command;
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_OPTIONS_H_
