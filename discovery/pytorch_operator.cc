#include "discovery/pytorch_operator.h"

#include "absl/strings/str_cat.h"

namespace distjob {

absl::StatusOr<PyTorchOperatorLayout> PyTorchOperatorNodes(
    const Identity& self, const Cluster& cluster,
    const std::string& master_task, const std::string& worker_task) {
  const TaskPeers* master = cluster.Find(master_task);
  const TaskPeers* worker = cluster.Find(worker_task);
  if (master == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("PyTorch job has no '", master_task, "' task among the ",
                     PeerSourceName(cluster.source), " peers"));
  }
  if (master->hosts.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PyTorch job needs exactly one '", master_task, "' replica, ",
        master->origin, " lists ", master->hosts.size()));
  }
  PyTorchOperatorLayout layout;
  layout.master_addr = master->hosts[0];
  layout.nnodes = 1 + (worker ? static_cast<int>(worker->hosts.size()) : 0);
  if (self.task == master_task) {
    layout.node_rank = 0;
  } else if (self.task == worker_task) {
    layout.node_rank = self.index + 1;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", self.task, "' is neither '", master_task,
                     "' nor '", worker_task, "' in a PyTorch job"));
  }
  return layout;
}

}  // namespace distjob
