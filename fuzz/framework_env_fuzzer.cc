// The framework input a pod finds in its environment or flags: TF_CONFIG
// written by an operator (kept and checked, or replaced), DMLC_ROLE,
// --tf-roles, the Kubeflow replica spec and --peers, through the framework
// choice (discovery/framework), the operators' PyTorch layout and the
// launchers' TF_CONFIG / DMLC_* builders (launchers/framework_env).
// Fields ('\0'-separated): peers ("task=h1,h2;task2=h3", or
// "kubeflow:worker=2,ps=1"), --tf-roles, hostname, then KEY=VALUE entries.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "discovery/framework.h"
#include "discovery/identity.h"
#include "discovery/job_env.h"
#include "discovery/peers.h"
#include "discovery/pytorch_operator.h"
#include "fuzz/fuzz_input.h"
#include "launchers/framework_env.h"
#include "launchers/tensorflow.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> fields = distjob::SplitFields(data, size, 64);
  fields.resize(std::max<size_t>(fields.size(), 3));
  const distjob::EnvMap env = distjob::FieldsToEnv(fields, 3);

  absl::StatusOr<distjob::Cluster> cluster =
      absl::StartsWith(fields[0], "kubeflow:")
          ? distjob::KubeflowPeers("job", fields[0].substr(9), "ns",
                                   "cluster.local")
          : distjob::ParseStaticPeers(fields[0], "fuzz");
  if (!cluster.ok()) return 0;

  distjob::DiscoveryOptions options;
  if (!distjob::ParseTfRoles(fields[1], &options.tf_roles).ok()) return 0;
  options.tf_no_evaluator = !fields[1].empty() && fields[1][0] == 'e';
  options.override_tf_config = !fields[2].empty() && fields[2][0] == 'o';

  distjob::JobEnv job;
  job.cluster = *cluster;
  job.framework = distjob::ChooseFramework(distjob::Framework::kAuto,
                                           job.cluster, env, options.tf_roles)
                      .framework;
  distjob::IdentityInputs in;
  in.hostname = fields[2];
  // Without an identity FrameworkEnv still checks a TF_CONFIG it keeps.
  if (auto id = distjob::ResolveIdentity(in, env, job.cluster); id.ok()) {
    job.identity = *id;
    job.has_identity = true;
    (void)distjob::PyTorchOperatorNodes(id->id, job.cluster);
  }
  (void)distjob::FrameworkEnv(job, options, env);
  return 0;
}
