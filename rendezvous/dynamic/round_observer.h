// What one step of Next reads before it asks Decide (rdzv_decide.h): the
// job's end, the round's state, this node's place in a closed round (with
// the master's record for a known member, in one request), the decider's
// lease, and whether a closed round that left this node out has a live
// member. Few small reads per wake-up, whatever the job's size: a state
// the last watch told is not read again, a rank record is cached per
// round.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_OBSERVER_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_OBSERVER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/dynamic/failure_claim.h"
#include "rendezvous/dynamic/join_state.h"
#include "rendezvous/dynamic/rdzv_decide.h"
#include "rendezvous/dynamic/wait_report.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class RoundObserver {
 public:
  // What it uses of the facade; every pointer outlives it.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    std::string node;              // this node
    absl::Duration close_timeout;  // how long the master's record is awaited
    const JoinState* join = nullptr;
    // The node that decides after a failure, whose lease is looked at.
    const FailureClaim* failure = nullptr;
    // Told the addresses of a closed round's members.
    WaitReport* report = nullptr;
  };

  // This node's rank record in the closed round last read (by round and
  // closer), so that a wake-up does not fetch it again.
  struct RankCache {
    int64_t round = -1;
    std::string closer;
    std::optional<RankRecord> mine;
    // The master's record, read with `mine` (IsKnownMember), or why it
    // could not be; unset: Result reads it.
    std::optional<absl::StatusOr<std::string>> master;
  };

  explicit RoundObserver(Deps deps);
  RoundObserver(const RoundObserver&) = delete;
  RoundObserver& operator=(const RoundObserver&) = delete;

  // Reads what Decide needs (Observed): the end, the round, this node's
  // place in it, and the leases that decide whether to wait. `known`: the
  // state's key as a watch of the state's prefix from the last read saw
  // it change, the one change there up to `known_revision` (then the job
  // has not ended either): it is not read again.
  // `listed`: the state's listing, already read (AddRecordThenList);
  // taken from.
  Observed Observe(RankCache* cache,
                   const std::optional<WatchChange>& known = std::nullopt,
                   int64_t known_revision = 0, StoreListing* listed = nullptr);

 private:
  // Whether closed round `st` says this node is a member other than group
  // rank 0 without a read (RdzvState::leader).
  bool IsKnownMember(const RdzvState& st) const;
  // This node's rank record in closed round `st` (NotFound: no member),
  // and for a known member the master's record with it, in `cache`.
  absl::StatusOr<std::string> ReadRankRecord(const RdzvState& st,
                                             RankCache* cache);
  // Observe's steps; each false when `*o` is complete (an error, or the
  // job's end): the state and the job's end, this node's rank record in
  // closed round `st` (into `cache`), and whether any member of closed
  // round `st`, which this node is not in, is alive.
  bool ObserveState(const std::optional<WatchChange>& known,
                    int64_t known_revision, StoreListing* listed, Observed* o);
  bool ObserveRank(const RdzvState& st, RankCache* cache, Observed* o);
  void ObserveMembersAlive(const RdzvState& st, Observed* o);

  const Deps d_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_OBSERVER_H_
