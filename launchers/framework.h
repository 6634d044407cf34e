// Which framework environment a pod gets (--framework auto|pytorch|
// tensorflow|mxnet|none), and the dispatch to its launcher.
#ifndef DISTJOB_LAUNCHERS_FRAMEWORK_H_
#define DISTJOB_LAUNCHERS_FRAMEWORK_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/environment.h"
#include "discovery/peers.h"
#include "launchers/framework_types.h"
#include "launchers/mxnet.h"
#include "launchers/tensorflow.h"

namespace distjob {

struct FrameworkChoice {
  std::string framework;  // pytorch | tensorflow | mxnet | none
  std::string reason;     // why, for the log and --explain
};

// `requested` is the --framework value. Auto looks at the task names
// (scheduler/server: mxnet; ps/chief/evaluator: tensorflow; master:
// pytorch) and then at the operator's env (TF_CONFIG, DMLC_ROLE).
FrameworkChoice ChooseFramework(
    Framework requested, const Cluster& cluster, const EnvMap& env,
    const std::map<std::string, std::string>& tf_roles);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_FRAMEWORK_H_
