#include "discovery/job_env.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/net.h"
#include "discovery/dns_resolver.h"
#include "discovery/framework.h"
#include "discovery/k8s_controllers.h"
#include "discovery/pytorch_operator.h"

namespace distjob {
namespace {

absl::StatusOr<Cluster> FindPeers(const DiscoveryOptions& d, const EnvMap& env,
                                  const std::string& job) {
  if (!d.peers.empty()) return ParseStaticPeers(d.peers, "flag --peers");
  if (!d.peers_file.empty()) return ReadPeersFile(d.peers_file);
  if (!d.replicas.empty()) {
    return KubeflowPeers(job, d.replicas, d.k8s_namespace, d.cluster_domain);
  }
  return ReadVolcanoPeers(d.volcano_dir, env);
}

// The newer controllers' conventions, for a pod no Volcano or Kubeflow
// peer list describes.
absl::Status PlaceByController(const DiscoveryOptions& d, const EnvMap& env,
                               JobEnv* job) {
  ControllerInputs in;
  in.hostname = d.hostname.empty() ? LocalHostname() : d.hostname;
  in.replicated_job = d.replicated_job;
  in.nnodes = d.nnodes;
  in.layout_given = d.layout_given;
  struct stat labels_file {};
  // Missing (the default path, no downward-API volume): no labels.
  if (!d.pod_labels_file.empty() &&
      (stat(d.pod_labels_file.c_str(), &labels_file) == 0 || errno != ENOENT)) {
    // A pod's labels are a few KiB; the bound is far past any.
    auto text = ReadInputFile("--pod-labels-file", d.pod_labels_file,
                              size_t{256} << 10);
    if (!text.ok()) return text.status();
    auto labels = ParseDownwardApiLabels(
        *text, absl::StrCat("labels file ", d.pod_labels_file));
    if (!labels.ok()) return labels.status();
    in.labels = *std::move(labels);
    in.labels_origin = absl::StrCat("file ", d.pod_labels_file);
  }
  const bool indexed_job_layout =
      Lookup(env, "JOB_COMPLETION_INDEX") && !Lookup(env, "PET_NODE_RANK") &&
      !Lookup(env, "LWS_GROUP_SIZE") && !in.labels.count(kJobSetNameLabel) &&
      in.replicated_job.empty() && in.nnodes > 0 && !in.layout_given;
  if (indexed_job_layout && d.hostname.empty() &&
      in.hostname.find('.') == std::string::npos) {
    // The subdomain an Indexed Job's pods are named under is in the pod's
    // FQDN (kubelet's /etc/hosts line), not in its hostname.
    const std::string fqdn = Fqdn(in.hostname);
    if (absl::StartsWith(fqdn, in.hostname + ".")) in.hostname = fqdn;
  }
  auto found = DetectController(in, env);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return absl::OkStatus();
  const ControllerLayout& l = **found;
  if (!l.warning.empty()) DJ_LOG_WARNING("{}", l.warning);
  job->controller = l.controller;
  job->pod_index = l.pod_index;
  job->pod_index_source = l.pod_index_source;
  if (l.fixed) {
    job->pytorch_layout = true;
    job->node_rank = l.node_rank;
    job->nnodes = l.nnodes;
    job->master_addr = l.master_addr;
    job->master_port = d.master_port;
    job->master_source = l.master_source;
    job->layout_rank_source = l.rank_source;
    job->layout_size_source = l.size_source;
  }
  DJ_LOG_INFO("{} pod: pod index {}{}", l.controller,
              l.pod_index.empty() ? "none" : l.pod_index,
              l.fixed ? absl::StrCat(", node rank ", l.node_rank, " of ",
                                     l.nnodes, ", master ", l.master_addr)
                      : std::string());
  return absl::OkStatus();
}

// The framework of a pod that asks for no identity (no peers, no
// --framework, --job-name or --task).
void NameFrameworkWithoutIdentity(const DiscoveryOptions& d, const EnvMap& env,
                                  JobEnv* job) {
  if (job->pytorch_layout) {
    // A controller's fixed layout is torchrun's static rendezvous.
    job->framework = "pytorch";
    job->framework_reason = absl::StrCat("the ", job->controller, " layout");
    return;
  }
  // torchrun's PET_* alone (Kubeflow's elastic PyTorchJob) say PyTorch;
  // the rendezvous, not the operator's layout, places the node.
  FrameworkChoice choice =
      ChooseFramework(d.framework, job->cluster, env, d.tf_roles);
  if (choice.framework == "pytorch") {
    job->framework = choice.framework;
    job->framework_reason = choice.reason;
    return;
  }
  job->framework_reason = "no peers found";
}

// This pod's job, task and index among the peers; Kubeflow's peer names,
// which embed the job name, once it is known.
absl::Status IdentifyPod(const DiscoveryOptions& d, const EnvMap& env,
                         JobEnv* job) {
  IdentityInputs in;
  in.job = d.job_name;
  in.task = d.task;
  in.index = d.task_index;
  in.hostname = d.hostname.empty() ? LocalHostname() : d.hostname;
  auto identity = ResolveIdentity(in, env, job->cluster);
  if (!identity.ok()) return identity.status();
  job->identity = std::move(*identity);
  job->has_identity = true;
  if (!d.replicas.empty() && d.job_name.empty()) {
    auto named = FindPeers(d, env, job->identity.id.job);
    if (!named.ok()) return named.status();
    job->cluster = std::move(*named);
  }
  if (job->framework == "none") {
    // Task names name no framework, but an MPI job's roles (mpimaster,
    // mpiworker) are only decided after discovery (agent/mpi_plan.h):
    // "framework none" here would contradict the role logged next.
    DJ_LOG_INFO(
        "this pod is job={} task={} index={}; its framework is decided "
        "after discovery (an MPI role, else none: {})",
        job->identity.id.job, job->identity.id.task, job->identity.id.index,
        job->framework_reason);
    return absl::OkStatus();
  }
  DJ_LOG_INFO("this pod is job={} task={} index={}; framework {} ({})",
              job->identity.id.job, job->identity.id.task,
              job->identity.id.index, job->framework, job->framework_reason);
  return absl::OkStatus();
}

// The operators' non-elastic master/worker layout, for a PyTorch job with
// a master task. Without one (Kubeflow's elastic PyTorchJob) the
// rendezvous places the node.
absl::Status PlaceByOperator(const DiscoveryOptions& d, const EnvMap& env,
                             JobEnv* job) {
  if (job->framework != "pytorch" || !job->cluster.Find("master")) {
    return absl::OkStatus();
  }
  auto layout = PyTorchOperatorNodes(job->identity.id, job->cluster);
  if (!layout.ok()) return layout.status();
  job->pytorch_layout = true;
  job->node_rank = layout->node_rank;
  job->nnodes = layout->nnodes;
  job->master_addr = layout->master_addr;
  job->master_source = job->cluster.Find("master")->origin;
  // The operators publish the port they opened (Volcano 23456, Kubeflow
  // the container port); torchrun's --master-port otherwise.
  job->master_port = d.master_port;
  if (auto port = Lookup(env, "MASTER_PORT"); port.has_value()) {
    int p = 0;
    if (!absl::SimpleAtoi(*port, &p) || p < 1 || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env MASTER_PORT='", *port, "' is not a port (1-65535)"));
    }
    job->master_port = p;
  }
  return absl::OkStatus();
}

// Waits, up to --dns-timeout, until the peers' DNS names resolve.
absl::Status WaitForPeerNames(const DiscoveryOptions& d, const Cluster& cluster,
                              std::function<bool()> cancelled) {
  // A standalone job dials no peer: waiting for their names (the pod's own
  // included, which exists only once the pod is Ready) could only hang it.
  if (d.standalone || cluster.tasks.empty() ||
      d.dns_timeout <= absl::ZeroDuration()) {
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (const TaskPeers& t : cluster.tasks) {
    for (const std::string& h : t.hosts) {
      if (!IsIpLiteral(h)) names.push_back(h);
    }
  }
  if (names.empty()) return absl::OkStatus();
  DnsOptions dns;
  dns.resolver.servers = d.dns_servers;
  dns.resolver.cancelled = std::move(cancelled);
  dns.timeout = d.dns_timeout;
  auto resolved = WaitForNames(names, dns);
  if (!resolved.ok()) return resolved.status();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobEnv> ResolveJobEnv(const DiscoveryOptions& d,
                                     const EnvMap& env,
                                     std::function<bool()> cancelled) {
  JobEnv job;
  // Kubeflow names embed the job name, which may itself come from the
  // hostname: resolve the identity against the replica types first.
  auto cluster = FindPeers(d, env, d.job_name.empty() ? "job" : d.job_name);
  if (!cluster.ok()) return cluster.status();
  job.cluster = std::move(*cluster);
  if (job.cluster.tasks.empty()) {
    if (absl::Status s = PlaceByController(d, env, &job); !s.ok()) return s;
  }
  const bool wants_identity = !job.cluster.tasks.empty() ||
                              d.framework != Framework::kAuto ||
                              !d.job_name.empty() || !d.task.empty();
  if (!wants_identity) {
    NameFrameworkWithoutIdentity(d, env, &job);
    return job;
  }
  FrameworkChoice choice =
      ChooseFramework(d.framework, job.cluster, env, d.tf_roles);
  job.framework = choice.framework;
  job.framework_reason = choice.reason;
  if (job.cluster.tasks.empty() && job.framework != "none") {
    // The operator's own TF_CONFIG, kept (launchers/ checks it).
    if (job.framework == "tensorflow" && Lookup(env, "TF_CONFIG")) return job;
    return absl::InvalidArgumentError(absl::StrCat(
        "--framework ", job.framework, " needs peers: none in ", d.volcano_dir,
        " or VC_*_HOSTS; set --peers, --peers-file or --replicas"));
  }
  if (absl::Status s = IdentifyPod(d, env, &job); !s.ok()) return s;
  // The layout is checked before the DNS wait below, so a bad value (a
  // MASTER_PORT that is no port) exits at once rather than after it.
  if (absl::Status s = PlaceByOperator(d, env, &job); !s.ok()) return s;
  if (absl::Status s = WaitForPeerNames(d, job.cluster, std::move(cancelled));
      !s.ok()) {
    return s;
  }
  return job;
}

}  // namespace distjob
