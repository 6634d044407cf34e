// A closed round's member list, as its closer wrote it in chunks: read by
// the facade (a close, the master's admission list), the exit barrier and
// the progress lines alike, so it lives apart from each; and the few
// names of a list a progress line shows.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_MEMBERS_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_MEMBERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

// Closed round `round`'s `size` members (closed by `closer`) in rank order.
absl::StatusOr<std::vector<RdzvParticipant>> ReadRoundMembers(
    StoreInterface* store, const RdzvKeys& keys, int64_t round,
    const std::string& closer, int size);

// At most a few of `names`, then how many more, for a progress line of a
// job of any size.
std::string NameList(const std::vector<std::string>& names);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_MEMBERS_H_
