// Where a pod stands in the job, from what the newer Kubernetes controllers
// tell it: an Indexed Job (JOB_COMPLETION_INDEX, hostname <job>-<index>),
// a JobSet (hostname <jobset>-<replicatedjob>-<jobIndex>-<podIndex>, its
// jobset.sigs.k8s.io/* labels through a downward-API file), a
// LeaderWorkerSet (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX)
// and Kubeflow Trainer v2 (PET_* from its torch plugin on a JobSet).
#ifndef DISTJOB_DISCOVERY_K8S_CONTROLLERS_H_
#define DISTJOB_DISCOVERY_K8S_CONTROLLERS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/environment.h"

namespace distjob {

// The downward-API labels a JobSet pod reads (JobSet's own label keys).
inline constexpr char kJobSetNameLabel[] = "jobset.sigs.k8s.io/jobset-name";
inline constexpr char kReplicatedJobLabel[] =
    "jobset.sigs.k8s.io/replicatedjob-name";
inline constexpr char kJobIndexLabel[] = "jobset.sigs.k8s.io/job-index";
inline constexpr char kJobGlobalIndexLabel[] =
    "jobset.sigs.k8s.io/job-global-index";
inline constexpr char kReplicatedJobReplicasLabel[] =
    "jobset.sigs.k8s.io/replicatedjob-replicas";
inline constexpr char kGlobalReplicasLabel[] =
    "jobset.sigs.k8s.io/global-replicas";
inline constexpr char kCoordinatorLabel[] = "jobset.sigs.k8s.io/coordinator";

struct ControllerInputs {
  // The pod's hostname; a dotted name (<host>.<subdomain>...) also gives
  // the subdomain.
  std::string hostname;
  std::string replicated_job;  // --replicated-job
  // Downward-API labels (ParseDownwardApiLabels) and where they came from.
  std::map<std::string, std::string> labels;
  std::string labels_origin;
  // --nnodes N when given as a fixed count; 0 otherwise.
  int nnodes = 0;
  // The torchrun layout is the user's (--node-rank, --master-addr,
  // --rdzv-backend/-endpoint given, or an elastic --nnodes MIN:MAX): the
  // controller then only places the node in the dynamic rank order.
  bool layout_given = false;
};

struct ControllerLayout {
  std::string controller;  // indexed-job | jobset | lws | trainer-v2
  // A fixed layout (the static rendezvous): this node's rank, the node
  // count and the master, each with where it came from (for --explain).
  bool fixed = false;
  int node_rank = 0;
  int nnodes = 0;
  std::string master_addr;
  std::string rank_source, size_source, master_source;
  // The pod's place in the dynamic rendezvous' rank order (dotted
  // integers, e.g. "3" or "1.0"); "" when the controller gives none.
  std::string pod_index;
  std::string pod_index_source;
  // Set when the layout is the user's and the hostname does not match the
  // controller's naming (a hostNetwork pod has its node's hostname): the
  // check is then a warning, and what only the hostname gave is dropped.
  std::string warning;
};

// nullopt when no controller's variables are present. Inputs that
// contradict each other (an index beyond the group size, a hostname that
// does not match the JobSet labels) are InvalidArgument naming both; a
// hostname that does not match is only a `warning` where the controller's
// layout is not used.
absl::StatusOr<std::optional<ControllerLayout>> DetectController(
    const ControllerInputs& in, const EnvMap& env);

// A downward-API `labels` file: one key="value" per line, the value
// quoted as Go's %q does.
absl::StatusOr<std::map<std::string, std::string>> ParseDownwardApiLabels(
    const std::string& text, const std::string& origin);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_K8S_CONTROLLERS_H_
