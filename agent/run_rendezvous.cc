#include "agent/run_rendezvous.h"

#include <string>
#include <utility>

#include "agent/worker_env.h"
#include "rendezvous/dynamic/c10d_rendezvous.h"
#include "rendezvous/rendezvous_kind.h"
#include "rendezvous/standalone_rendezvous.h"

namespace distjob {

absl::StatusOr<std::unique_ptr<Rendezvous>> MakeRunRendezvous(
    const RunOptions& options, std::shared_ptr<WorkerStoreHost> worker_store) {
  const LaunchOptions& launch = options.launch;
  if (ChooseRendezvous(launch.standalone, launch.max_nodes,
                       launch.rdzv_backend) == RendezvousKind::kLocal) {
    return std::make_unique<StandaloneRendezvous>(
        launch.local_addr, launch.standalone ? "" : launch.rdzv_id,
        std::move(worker_store),
        launch.master_port_given ? launch.master_port : 0);
  }
  RendezvousParams params;
  params.backend = launch.rdzv_backend;
  params.endpoint = launch.endpoint;
  params.etcd = launch.etcd;
  params.run_id = launch.rdzv_id;
  if (!launch.rdzv_key_suffix.empty()) {
    params.key_run_id = launch.rdzv_id + launch.rdzv_key_suffix;
  }
  params.config = launch.rdzv_config;
  params.min_nodes = launch.min_nodes;
  params.max_nodes = launch.max_nodes;
  params.local_addr = launch.local_addr;
  params.pod_index = launch.pod_index;
  params.order_key = launch.rank_order_key;
  params.security = options.security;
  params.node_rank = launch.node_rank;
  params.master_addr = launch.master_addr;
  params.master_port = launch.master_port;
  params.master_port_given = launch.master_port_given;
  params.worker_store = std::move(worker_store);
  params.worker_store_off = WorkerStoreOffReason(launch);
  return MakeRendezvousFor(params);
}

}  // namespace distjob
