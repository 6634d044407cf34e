// What one node does next in DynamicRendezvous::Next, as a pure function
// of what it read from the store and of its own progress: no store, no
// clock, no I/O. Next reads (Observed), asks Decide, applies the Action,
// and asks again; an action that changes the store or waits makes it read
// again (Observed::fresh false).
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_RDZV_DECIDE_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_RDZV_DECIDE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rendezvous/rdzv_state.h"

namespace distjob {

// One read of the store by one node.
struct Observed {
  // False: nothing read since the store last changed by this node's hand
  // or since it last waited; the next action is to read (or to give up).
  // A node that has joined no round and held none yet joins round 0 with
  // its read: a job's first round, which every node of a new job joins.
  bool fresh = false;
  // ctl/aborted, once another node ended the job (then nothing else read).
  std::optional<std::string> aborted;
  // Reading or decoding ctl/state failed (then nothing else read).
  absl::Status state_error;
  RdzvState state;
  std::string raw;  // ctl/state as read, for the compare-set
  int64_t revision = 0;
  int64_t state_revision = 0;  // of the last write of ctl/state
  // This node's rank record in `state` if that is closed: unreadable
  // (rank_error, transient) or undecodable (malformed, fatal).
  absl::Status rank_error;
  absl::Status malformed;
  std::optional<RankRecord> mine;
  // Read only for a member of a round whose failure claim another node
  // won: whether that node still holds its lease (nullopt: cannot tell).
  std::optional<bool> decider_alive;
  // Read only when `state` is closed and this node is no member: whether
  // any member still holds its lease (nullopt: cannot tell).
  std::optional<bool> members_alive;
};

// This node: its place in the rendezvous, its clock and its settings.
struct Progress {
  absl::Time now;
  absl::Time deadline;  // of this Next (join_timeout)
  bool cancelled = false;
  bool store_lost = false;
  int min_nodes = 1;
  int max_nodes = 1;
  absl::Duration last_call_timeout;
  absl::Duration keep_alive_interval;
  int64_t last_round = -1;     // the round Next last returned
  int64_t decider_round = -1;  // a round whose failure claim another won
  int pending_restarts = 0;
  // Its place in the open round joined_round (1-based; past max_nodes the
  // round was full), whether its record is written, and when it joined.
  int64_t joined_round = -1;
  int64_t join_index = 0;
  bool join_written = false;
  absl::Time joined_at;
  // The round whose last call this Next announced already (-1: none).
  int64_t announced_round = -1;
};

struct Action {
  enum Kind {
    kObserve,           // read the store
    kJoinFirstRound,    // join round 0 and read the store, in one request
    kCancelled,         // return: Cancel was called
    kStoreLost,         // return: the monitor lost the store
    kTimedOut,          // return: join_timeout passed
    kFail,              // return `status` (malformed records)
    kEndJob,            // return: another node ended the job (`aborted`)
    kReconnect,         // the store is not reachable yet: heartbeat, re-read
    kRetryRead,         // this node's rank record was unreadable: re-read
    kReturnResult,      // a member of a new closed round: its result
    kAwaitDecider,      // another node's failure decides: wait on ctl/
    kOpenNextRound,     // compare-set NextRound(state, pending_restarts)
    kWaitForNextRound,  // outside a closed or full round: wait, leased
    kJoin,              // take a place in the open round (joined/<round>)
    kWriteJoinRecord,   // write join/<round>/<index>
    kNoteRestarts,      // compare-set the open round with pending_restarts
    kAwaitLastCall,     // min_nodes joined: wait until `until` for more
    kCloseRound,        // write the members, compare-set the closed state
    kWaitForJoiners,    // fewer than min_nodes: wait for a change
  };
  Kind kind = kObserve;
  absl::Status status;  // kFail
  // kAwaitLastCall: the last call's end. kWaitForJoiners: when to look
  // again without a change (the deadline nears); the state's change wakes
  // it before, so thousands of waiting nodes do not re-read on a timer.
  absl::Time until;
  bool forget_decider = false;  // kOpenNextRound: the decider is gone
  // kAwaitLastCall, kCloseRound: log that min_nodes joined (once a round).
  bool announce_last_call = false;
  // kWaitForJoiners: the deadline nears; note the joiners' addresses and
  // wake on any write of the job, not only ctl/state.
  bool follow_joiners = false;
};
inline constexpr int kNumActionKinds = Action::kWaitForJoiners + 1;

const char* ActionName(Action::Kind kind);

// Whether a node whose lease is due renews it before taking this step. A
// read needs no lease, a join carries it in its own request
// (StoreInterface::LeaseThenAddRecord), a reconnect's heartbeat and a
// waiting node's (which writes its ask under the lease) are the renewal,
// and a step that returns an error ends the rendezvous. A node that
// returns its result renews a due lease first, as it holds the round.
bool RenewsLeaseFirst(Action::Kind kind);

Action Decide(const Observed& state, const Progress& progress);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_RDZV_DECIDE_H_
