// The rendezvous `run`'s options name: standalone and one-node jobs get
// the local one, every other job the backend of --rdzv-backend (static,
// c10d, etcd), with the workers' store the agent serves.
#ifndef DISTJOB_AGENT_RUN_RENDEZVOUS_H_
#define DISTJOB_AGENT_RUN_RENDEZVOUS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "rendezvous/rendezvous.h"

namespace distjob {

// `worker_store`: the workers' store this agent serves (nullptr: worker
// rank 0 hosts it). The default of AgentDeps::make_rendezvous.
absl::StatusOr<std::unique_ptr<Rendezvous>> MakeRunRendezvous(
    const RunOptions& options, std::shared_ptr<WorkerStoreHost> worker_store);

}  // namespace distjob

#endif  // DISTJOB_AGENT_RUN_RENDEZVOUS_H_
