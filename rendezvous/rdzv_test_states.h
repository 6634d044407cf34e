// Round states and member lists as the rendezvous tests build them
// (testonly): one place, so rdzv_state_test and rdzv_status_test do not
// each spell out the fields of a closed round.
#ifndef DISTJOB_RENDEZVOUS_RDZV_TEST_STATES_H_
#define DISTJOB_RENDEZVOUS_RDZV_TEST_STATES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/rdzv_state.h"

namespace distjob {

// Round `round`, open: no members yet.
RdzvState OpenRound(int64_t round);

// Round `round`, closed by `closer` with `size` nodes running `world_size`
// workers in all.
RdzvState ClosedRound(int64_t round, const std::string& closer, int size,
                      int world_size);

// `n` members named node-0, node-1, ..., each with `nproc` workers at `addr`.
std::vector<RdzvParticipant> NumberedNodes(
    int n, int nproc = 1, const std::string& addr = "10.0.0.1");

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_TEST_STATES_H_
