// PyTorch without elasticity, as the operators lay it out: one master task
// and one worker task (Volcano's pytorch plugin, Kubeflow's PyTorchJob).
// Node rank 0 is master-0, worker i is node i+1.
#ifndef DISTJOB_DISCOVERY_PYTORCH_OPERATOR_H_
#define DISTJOB_DISCOVERY_PYTORCH_OPERATOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "discovery/peers.h"

namespace distjob {

struct PyTorchOperatorLayout {
  std::string master_addr;  // the master-0 host
  int node_rank = 0;
  int nnodes = 1;
};

absl::StatusOr<PyTorchOperatorLayout> PyTorchOperatorNodes(
    const Identity& self, const Cluster& cluster,
    const std::string& master_task = "master",
    const std::string& worker_task = "worker");

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_PYTORCH_OPERATOR_H_
