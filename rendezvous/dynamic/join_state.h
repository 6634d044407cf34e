// This node's place in the round it joined last: written by the join
// attempt, read by the next one's decisions and by the observer (which
// tells from it whether a closed round names this node without a read).
// It outlives each call of Next.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_JOIN_STATE_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_JOIN_STATE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace distjob {

struct JoinState {
  // This node's place in the open round joined_round (1-based; past
  // max_nodes: the round was full), whether its join record is written,
  // and when it joined (its last call runs from there).
  int64_t joined_round = -1;
  int64_t join_index = 0;
  bool join_written = false;
  absl::Time joined_at;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_JOIN_STATE_H_
