// The rendezvous seen from the agent loop: join the next round, learn this
// node's place in it. Backends: standalone (this file's sibling), static,
// and the elastic c10d-style store.
#ifndef DISTJOB_RENDEZVOUS_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_RENDEZVOUS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace distjob {

struct RendezvousResult {
  int64_t round = 0;
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;   // global rank of this node's local rank 0
  int world_size = 1;  // workers in the round, all nodes
  std::string master_addr;
  int master_port = 0;
  std::string run_id;
  bool use_agent_store = false;
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round with `local_world_size` workers on this node and
  // blocks until the round closes. Unavailable / DeadlineExceeded when the
  // store cannot be reached in time (the agent exits retryable).
  virtual absl::StatusOr<RendezvousResult> Next(int local_world_size) = 0;

  // Called once when the agent is done with the job.
  virtual void Shutdown() {}
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RENDEZVOUS_H_
