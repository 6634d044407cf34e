// How a DynamicRendezvous node closes an open round: the members from
// their join records, ranked, written in chunks with each member's rank
// record, before the compare-set of the state that closes it (a node that
// sees it closed finds its own). It keeps what it last wrote, so that the
// close after a last call's early write costs only the join count and the
// compare-set.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_CLOSE_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_CLOSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class RoundClose {
 public:
  // What it uses of the facade; every pointer outlives it.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    std::string node;  // this node, the closer
    int max_nodes = 1;
    absl::Duration lease;  // how long a counted joiner's record is awaited
  };

  explicit RoundClose(Deps deps);
  RoundClose(const RoundClose&) = delete;
  RoundClose& operator=(const RoundClose&) = delete;

  // Writes open round `st`'s members and rank records as this node would
  // close it; State is then the state that closes it. `ahead`: during
  // its last call, where a join record on its way is not waited for (the
  // close at the call's end writes again, with it).
  absl::Status Write(const RdzvState& st, bool ahead = false);
  // Whether what Write last wrote still closes open round `st`: written
  // for that round from join records 1..N, and N nodes joined it still.
  bool StillWritten(const RdzvState& st);
  // The state that closes open round `open` as Write last wrote it.
  RdzvState State(const RdzvState& open) const;
  // The members Write last wrote.
  int size() const { return size_; }

 private:
  // The members of open round `round`, in join order, from their records;
  // `by_index`: they are join records 1..N, none missing; `counted`, if
  // set: N, the round's join count (at most max_nodes) when it was read.
  // A record counted but not written yet is waited for up to a lease, or,
  // with `wait_for_records` false, taken for missing at once.
  absl::StatusOr<std::vector<RdzvParticipant>> Joined(
      int64_t round, bool* by_index, int64_t* counted = nullptr,
      bool wait_for_records = true);

  const Deps d_;
  // What Write wrote, for State.
  int size_ = 0;
  int world_ = 0;
  std::string leader_;  // RdzvState::leader
  // The round Write last wrote (-1: none), from how many joins, and
  // whether from join records 1..N (StillWritten).
  int64_t round_ = -1;
  int64_t joined_ = 0;
  bool by_index_ = false;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_CLOSE_H_
