// Builds the rendezvous a `run` asks for: the elastic one over the embedded
// gRPC store (--rdzv-backend c10d), hosting the store or joining it, and
// the fixed-size static one (--rdzv-backend static).
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_C10D_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_C10D_RENDEZVOUS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/master_watch.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/store_credentials.h"

namespace distjob {

struct RendezvousParams {
  // Parsed once, by the agent's flags: nothing here is parsed again.
  RdzvBackend backend = RdzvBackend::kC10d;
  // c10d: the store's address.
  Endpoint endpoint;
  // etcd, etcd-v3: the cluster and the backend's own --rdzv-conf keys.
  EtcdStoreOptions etcd;
  std::string run_id = "none";
  // The run id the keys live under when not run_id (an agent that took
  // over from an outer agent: its round never touches the outer's).
  std::string key_run_id;
  RdzvConfig config;
  int min_nodes = 1;
  int max_nodes = 1;
  std::string local_addr;
  // The dynamic backends' rank order (RdzvParticipant): "" when none.
  std::string pod_index;
  std::string order_key;
  // c10d: the embedded store's token and TLS, for hosting and joining it.
  StoreSecurity security;
  // The agent serves the workers' TCPStore through this (nullptr: worker
  // rank 0 hosts it, TORCHELASTIC_USE_AGENT_STORE=False).
  std::shared_ptr<WorkerStoreHost> worker_store;
  // Without worker_store: the setting that opted out, for `status`.
  std::string worker_store_off;
  // static backend
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Given explicitly: a one-node elastic job's workers' store listens on
  // master_port (any backend's nodes but one pick a free port).
  bool master_port_given = false;
};

// InvalidArgument for a static backend's bad ranks (exit 2); Unavailable
// when is_host is forced and the port cannot be bound.
absl::StatusOr<std::unique_ptr<Rendezvous>> MakeRendezvousFor(
    const RendezvousParams& params);

// The address this node is known by: --local-addr, else its FQDN (as
// torchrun's socket.getfqdn()), else 127.0.0.1.
std::string LocalNodeAddress(const std::string& local_addr);

// Fixed membership: node `node_rank` of `nnodes`, every node with the
// same nproc, the master given by flags, as torchrun's static handler.
// With `worker_store`, node 0's agent serves the workers' TCPStore on
// --master-port (torchrun's static store is the workers').
class StaticRendezvous : public Rendezvous {
 public:
  StaticRendezvous(int node_rank, int nnodes, std::string master_addr,
                   int master_port, std::string run_id,
                   std::shared_ptr<WorkerStoreHost> worker_store = nullptr)
      : node_rank_(node_rank),
        nnodes_(nnodes),
        master_addr_(std::move(master_addr)),
        master_port_(master_port),
        run_id_(std::move(run_id)),
        worker_store_(std::move(worker_store)) {}
  absl::StatusOr<RendezvousResult> Next(int local_world_size) override;
  void Shutdown(bool succeeded) override;

 private:
  int node_rank_, nnodes_;
  std::string master_addr_;
  int master_port_;
  std::string run_id_;
  std::shared_ptr<WorkerStoreHost> worker_store_;
  // Not node rank 0: says while the master does not accept connections.
  std::unique_ptr<MasterWatch> master_watch_;
  int64_t round_ = 0;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_C10D_RENDEZVOUS_H_
