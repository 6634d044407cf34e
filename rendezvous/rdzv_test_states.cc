#include "rendezvous/rdzv_test_states.h"

namespace distjob {

RdzvState OpenRound(int64_t round) {
  RdzvState state;
  state.round = round;
  return state;
}

RdzvState ClosedRound(int64_t round, const std::string& closer, int size,
                      int world_size) {
  RdzvState state = OpenRound(round);
  state.closed = true;
  state.closer = closer;
  state.size = size;
  state.world_size = world_size;
  return state;
}

std::vector<RdzvParticipant> NumberedNodes(int n, int nproc,
                                           const std::string& addr) {
  std::vector<RdzvParticipant> members;
  members.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    members.push_back({"node-" + std::to_string(i), nproc, addr});
  }
  return members;
}

}  // namespace distjob
