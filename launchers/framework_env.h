// The framework variables every worker of a job gets on top of the agent's
// environment (TF_CONFIG, DMLC_*), from what discovery found: the step
// between discovery/ (who is who) and the per-worker PyTorch variables.
#ifndef DISTJOB_LAUNCHERS_FRAMEWORK_ENV_H_
#define DISTJOB_LAUNCHERS_FRAMEWORK_ENV_H_

#include "absl/status/statusor.h"
#include "common/environment.h"
#include "discovery/job_env.h"
#include "launchers/framework_types.h"

namespace distjob {

// TensorFlow: TF_CONFIG (or a kept one, checked); MXNet: DMLC_*; other
// frameworks: nothing. InvalidArgument names the bad input.
absl::StatusOr<LauncherEnv> FrameworkEnv(const JobEnv& job,
                                         const DiscoveryOptions& options,
                                         const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_FRAMEWORK_ENV_H_
