// TensorFlow: TF_CONFIG as Volcano's tensorflow plugin and Kubeflow's TFJob
// controller write it (docs/discovery.md).
#ifndef DISTJOB_LAUNCHERS_TENSORFLOW_H_
#define DISTJOB_LAUNCHERS_TENSORFLOW_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/environment.h"
#include "discovery/framework.h"
#include "discovery/peers.h"
#include "launchers/framework_types.h"

namespace distjob {

struct TensorFlowOptions {
  int port = 2222;
  // TF role -> task name, as Volcano's --ps/--worker/--chief/--evaluator.
  std::map<std::string, std::string> roles = DefaultTfRoles();
  bool include_evaluator = true;
  bool override_existing = false;
};

// "ps=ps,worker=trainer" over the defaults; roles other than
// ps|worker|chief|evaluator are InvalidArgument.
absl::Status ParseTfRoles(absl::string_view spec,
                          std::map<std::string, std::string>* roles);

// The TF_CONFIG this pod gets (none for a one-task-one-replica job or when
// an existing TF_CONFIG is kept). Kubeflow-sourced clusters get Kubeflow's
// shape (sorted keys, "environment":"cloud"); the others Volcano's (ps,
// worker, chief, evaluator order, no environment). A task named "master"
// stands for the chief when no chief task exists. An existing TF_CONFIG
// that is not a JSON object is InvalidArgument.
absl::StatusOr<LauncherEnv> TensorFlowEnv(const Identity& self,
                                          const Cluster& cluster,
                                          const TensorFlowOptions& options,
                                          const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_TENSORFLOW_H_
