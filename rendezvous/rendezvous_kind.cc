#include "rendezvous/rendezvous_kind.h"

namespace distjob {

RendezvousKind ChooseRendezvous(bool standalone, int max_nodes,
                                RdzvBackend backend) {
  if (standalone) return RendezvousKind::kLocal;
  if (backend == RdzvBackend::kStatic) {
    return max_nodes == 1 ? RendezvousKind::kLocal : RendezvousKind::kStatic;
  }
  return RendezvousKind::kDynamic;
}

}  // namespace distjob
