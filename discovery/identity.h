// Who this pod is: job name, task (role) name and index, from flags, the
// Volcano env plugin's VC_TASK_INDEX/VK_TASK_INDEX, and the pod hostname
// <job>-<task>-<index> (Volcano) or <job>-<type>-<index> (Kubeflow).
#ifndef DISTJOB_DISCOVERY_IDENTITY_H_
#define DISTJOB_DISCOVERY_IDENTITY_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/environment.h"
#include "discovery/peers.h"

namespace distjob {

struct IdentityInputs {
  std::string job;   // --job-name, empty when not given
  std::string task;  // --task
  int index = -1;    // --task-index, -1 when not given
  std::string hostname;
};

struct ResolvedIdentity {
  Identity id;
  // "job"/"task"/"index" -> "flag --x | env VC_TASK_INDEX | hostname".
  std::map<std::string, std::string> sources;
};

// Task names may contain '-', so the hostname is split against the tasks
// `cluster` knows; with no known tasks the last two '-' tokens are type and
// index (Kubeflow's rule, job names may contain '-'). A missing or
// ambiguous part, or an index beyond the task's host list, is
// InvalidArgument saying what was found and how to set it.
absl::StatusOr<ResolvedIdentity> ResolveIdentity(const IdentityInputs& in,
                                                 const EnvMap& env,
                                                 const Cluster& cluster);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_IDENTITY_H_
