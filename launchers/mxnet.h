// MXNet / ps-lite: the DMLC_* variables and MX_CONFIG as Kubeflow's MXJob
// controller writes them (docs/discovery.md).
#ifndef DISTJOB_LAUNCHERS_MXNET_H_
#define DISTJOB_LAUNCHERS_MXNET_H_

#include "absl/status/statusor.h"
#include "discovery/peers.h"
#include "launchers/framework_types.h"

namespace distjob {

struct MXNetOptions {
  int port = 9091;
};

// Local mode (only a worker task, one replica) gets nothing, as the MXNet
// operator. Distributed mode needs exactly one scheduler, at least one
// server and one worker; anything else is InvalidArgument before launch.
absl::StatusOr<LauncherEnv> MXNetEnv(const Identity& self,
                                     const Cluster& cluster,
                                     const MXNetOptions& options);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_MXNET_H_
