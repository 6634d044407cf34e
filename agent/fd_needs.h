// What the job's declared size asks of the agent's open-file limit: the
// connections each store it may serve holds when every rank and node of
// the largest round has connected. Declared to common/fd_budget before
// any store starts, so that each store's connection cap is what the limit
// leaves after the other's real need, and a cap below the job's own need
// is the one cut worth a warning.
#ifndef DISTJOB_AGENT_FD_NEEDS_H_
#define DISTJOB_AGENT_FD_NEEDS_H_

#include <cstddef>

#include "agent/cli/options.h"

namespace distjob {

// A torch 1.13 TCPStore client opens two connections (its requests' and
// its watch callbacks'); 2.x opens one. The workers may be either.
inline constexpr size_t kStoreConnectionsPerRank = 2;
// A node's agent reaches the rendezvous store through one gRPC channel.
inline constexpr size_t kStoreConnectionsPerNode = 1;

struct StoreNeeds {
  // The workers' TCPStore, served by this agent when it is group rank 0:
  // max_nodes × nproc ranks (0 when the agent does not serve it).
  size_t worker_store_connections = 0;
  // The c10d rendezvous store, hosted by one agent: max_nodes nodes (0
  // for the other backends, which host none).
  size_t rendezvous_store_connections = 0;
};

StoreNeeds NeedsOf(const LaunchOptions& launch);

// NeedsOf, declared to common/fd_budget (DeclareConnectionNeed).
void DeclareStoreNeeds(const LaunchOptions& launch);

}  // namespace distjob

#endif  // DISTJOB_AGENT_FD_NEEDS_H_
