#include "agent/fd_needs.h"

#include <algorithm>

#include "agent/worker_env.h"
#include "common/fd_budget.h"
#include "rendezvous/rendezvous_kind.h"

namespace distjob {

StoreNeeds NeedsOf(const LaunchOptions& launch) {
  StoreNeeds needs;
  const size_t nodes = static_cast<size_t>(std::max(launch.max_nodes, 1));
  const size_t nproc = static_cast<size_t>(std::max(launch.nproc, 1));
  if (WorkerStoreOnAgent(launch)) {
    needs.worker_store_connections = nodes * nproc * kStoreConnectionsPerRank;
  }
  const bool c10d =
      ChooseRendezvous(launch.standalone, launch.max_nodes,
                       launch.rdzv_backend) == RendezvousKind::kDynamic &&
      launch.rdzv_backend == RdzvBackend::kC10d;
  if (c10d) {
    needs.rendezvous_store_connections = nodes * kStoreConnectionsPerNode;
  }
  return needs;
}

void DeclareStoreNeeds(const LaunchOptions& launch) {
  const StoreNeeds needs = NeedsOf(launch);
  // Descriptors a connection: the workers' store holds its socket; the
  // rendezvous store its socket and gRPC's (conn_limiter.h).
  DeclareConnectionNeed(FdUser::kWorkerStore, needs.worker_store_connections,
                        1);
  DeclareConnectionNeed(FdUser::kRendezvousStore,
                        needs.rendezvous_store_connections, 2);
}

}  // namespace distjob
