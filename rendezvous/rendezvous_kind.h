// Which rendezvous a job gets, decided in one place: the agent's factory
// (agent/agent_loop.cc, MakeRendezvous) builds it and `env`'s plan
// (agent/worker_env.cc, PlanRound) describes it, so the two cannot drift.
#ifndef DISTJOB_RENDEZVOUS_RENDEZVOUS_KIND_H_
#define DISTJOB_RENDEZVOUS_RENDEZVOUS_KIND_H_

#include "rendezvous/rdzv_config.h"

namespace distjob {

enum class RendezvousKind {
  kLocal,    // --standalone, or one static node: no store, a free port
  kStatic,   // fixed nodes, ranks from --node-rank, the given master
  kDynamic,  // c10d or etcd: the elastic rendezvous decides everything
};

RendezvousKind ChooseRendezvous(bool standalone, int max_nodes,
                                RdzvBackend backend);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RENDEZVOUS_KIND_H_
