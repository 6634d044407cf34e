// --standalone: a one-node job. No store is needed, so none is started;
// each round is rank 0 of 1 with a fresh free MASTER_PORT, as torchrun's
// round-0 master does.
#ifndef DISTJOB_RENDEZVOUS_STANDALONE_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_STANDALONE_RENDEZVOUS_H_

#include <string>

#include "rendezvous/rendezvous.h"

namespace distjob {

class StandaloneRendezvous : public Rendezvous {
 public:
  // `master_addr` is --local-addr, or 127.0.0.1 when empty. `run_id` empty
  // means a fresh random id, as torchrun's --standalone.
  StandaloneRendezvous(std::string master_addr, std::string run_id);

  absl::StatusOr<RendezvousResult> Next(int local_world_size) override;

 private:
  std::string master_addr_;
  std::string run_id_;
  int64_t round_ = 0;
};

// 32 random hex digits, like a uuid4's hex.
std::string RandomRunId();

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STANDALONE_RENDEZVOUS_H_
