// Discovery for `run` and `env`: who this pod is, who its peers are
// (waiting for their DNS names), and the framework environment its workers
// get on top of the agent's own. Takes only its own typed options, so the
// program (agent/) depends on it and not the other way round.
#ifndef DISTJOB_DISCOVERY_JOB_ENV_H_
#define DISTJOB_DISCOVERY_JOB_ENV_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/environment.h"
#include "discovery/framework.h"
#include "discovery/identity.h"
#include "discovery/peers.h"

namespace distjob {

// Who this pod is and who its peers are (agent/cli/discovery_flags.cc), and the
// framework environment built from that; parsed and checked at start-up.
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
  Framework framework = Framework::kAuto;
  int tf_port = 2222;
  // TF role -> task name (--tf-roles over the defaults).
  std::map<std::string, std::string> tf_roles = DefaultTfRoles();
  bool tf_no_evaluator = false;
  bool override_tf_config = false;
  int mxnet_port = 9091;
  // From the launch options: a standalone job waits for no peer name, and
  // the PyTorch operators' layout falls back to torchrun's --master-port.
  bool standalone = false;
  int master_port = 29500;
  // The newer controllers (discovery/k8s_controllers.h): --replicated-job,
  // the downward-API labels file, --nnodes when a fixed count was given (0
  // otherwise), and whether the torchrun layout is the user's own.
  std::string replicated_job;
  std::string pod_labels_file = "/etc/podinfo/labels";
  int nnodes = 0;
  bool layout_given = false;
};

struct JobEnv {
  std::string framework = "none";
  std::string framework_reason;
  bool has_identity = false;
  ResolvedIdentity identity;
  Cluster cluster;
  // Framework variables for every worker: filled by launchers/
  // (FrameworkEnv), not by discovery.
  SourcedEnv extra;
  // The controller that placed this pod (indexed-job, jobset, lws,
  // trainer-v2; "" none), its place in the dynamic rank order, and where
  // the fixed layout's rank and size came from when it gave one.
  std::string controller;
  std::string pod_index;
  std::string pod_index_source;
  std::string layout_rank_source;
  std::string layout_size_source;
  // Set in PyTorch operator mode or from a controller's fixed layout: the
  // node layout `run` uses.
  bool pytorch_layout = false;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;
  int master_port = 0;
  std::string master_source;
};

// Errors: InvalidArgument (exit 2) naming the input; DeadlineExceeded when
// peer names never resolved (the retryable exit code).
// `cancelled` (optional) is polled while waiting for DNS.
absl::StatusOr<JobEnv> ResolveJobEnv(const DiscoveryOptions& options,
                                     const EnvMap& env,
                                     std::function<bool()> cancelled = nullptr);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_JOB_ENV_H_
