// Which framework environment a pod gets (--framework auto|pytorch|
// tensorflow|mxnet|none), and the dispatch to its launcher.
#ifndef DISTJOB_DISCOVERY_FRAMEWORK_H_
#define DISTJOB_DISCOVERY_FRAMEWORK_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/environment.h"
#include "discovery/peers.h"

namespace distjob {

enum class Framework { kAuto, kPyTorch, kTensorFlow, kMXNet, kMpi, kNone };

absl::StatusOr<Framework> ParseFramework(absl::string_view text);
const char* FrameworkName(Framework framework);

// TF role -> task name, as Volcano's --ps/--worker/--chief/--evaluator.
std::map<std::string, std::string> DefaultTfRoles();

struct FrameworkChoice {
  std::string framework;  // pytorch | tensorflow | mxnet | none
  std::string reason;     // why, for the log and --explain
};

// `requested` is the --framework value. Auto looks at the task names
// (scheduler/server: mxnet; ps/chief/evaluator: tensorflow; master:
// pytorch), then at the operator's env (PET_*, TF_CONFIG, DMLC_ROLE), and
// takes a job of TF workers only (the TF role "worker") for TensorFlow.
FrameworkChoice ChooseFramework(
    Framework requested, const Cluster& cluster, const EnvMap& env,
    const std::map<std::string, std::string>& tf_roles);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_FRAMEWORK_H_
