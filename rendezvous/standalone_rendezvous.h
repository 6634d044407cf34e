// --standalone (and a one-node job): no rendezvous store is needed. With
// a worker store (current torchrun's c10d on localhost) every round is
// rank 0 of 1 at the agent's TCPStore, the same port all along; without
// one (--worker-store worker) a fresh free MASTER_PORT every round, as
// torch 1.13's round-0 master.
#ifndef DISTJOB_RENDEZVOUS_STANDALONE_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_STANDALONE_RENDEZVOUS_H_

#include <memory>
#include <string>

#include "rendezvous/rendezvous.h"

namespace distjob {

class StandaloneRendezvous : public Rendezvous {
 public:
  // `master_addr` is --local-addr, or 127.0.0.1 when empty. `run_id` empty
  // means a fresh random id, as torchrun's --standalone.
  // `worker_store`: the agent serves the workers' store (nullptr: worker
  // rank 0 does).
  // `master_port`: an explicit --master-port, where the workers' store
  // listens (0: a free port).
  StandaloneRendezvous(std::string master_addr, std::string run_id,
                       std::shared_ptr<WorkerStoreHost> worker_store = nullptr,
                       int master_port = 0);

  absl::StatusOr<RendezvousResult> Next(int local_world_size) override;

 private:
  std::string master_addr_;
  std::string run_id_;
  std::shared_ptr<WorkerStoreHost> worker_store_;
  int master_port_;
  int64_t round_ = 0;
};

// 32 random hex digits, like a uuid4's hex.
std::string RandomRunId();

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STANDALONE_RENDEZVOUS_H_
