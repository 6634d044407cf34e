#include "launchers/framework_env.h"

#include "launchers/mxnet.h"
#include "launchers/tensorflow.h"

namespace distjob {

absl::StatusOr<LauncherEnv> FrameworkEnv(const JobEnv& job,
                                         const DiscoveryOptions& options,
                                         const EnvMap& env) {
  TensorFlowOptions tf;
  tf.port = options.tf_port;
  tf.include_evaluator = !options.tf_no_evaluator;
  tf.override_existing = options.override_tf_config;
  tf.roles = options.tf_roles;
  if (!job.has_identity) {
    // No peers of ours, but a TF_CONFIG the operator wrote is kept: it
    // must still be sane, a garbage one is a configuration error.
    if (job.framework != "pytorch" && Lookup(env, "TF_CONFIG")) {
      auto checked = TensorFlowEnv({}, job.cluster, tf, env);
      if (!checked.ok()) return checked.status();
    }
    return LauncherEnv();
  }
  if (job.framework == "tensorflow") {
    return TensorFlowEnv(job.identity.id, job.cluster, tf, env);
  }
  if (job.framework == "mxnet") {
    MXNetOptions mx;
    mx.port = options.mxnet_port;
    return MXNetEnv(job.identity.id, job.cluster, mx);
  }
  return LauncherEnv();
}

}  // namespace distjob
