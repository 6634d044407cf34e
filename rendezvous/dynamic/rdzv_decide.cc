#include "rendezvous/dynamic/rdzv_decide.h"

namespace distjob {
namespace {

Action Make(Action::Kind kind) {
  Action a;
  a.kind = kind;
  return a;
}

bool Fatal(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsDataLoss(s);
}

// Nothing read since the store last changed or since the last wait: give
// up, or read.
Action BeforeRead(const Progress& p) {
  if (p.cancelled) return Make(Action::kCancelled);
  if (p.store_lost) return Make(Action::kStoreLost);
  if (p.deadline - p.now <= absl::ZeroDuration()) {
    return Make(Action::kTimedOut);
  }
  // A node of a new job: its place in round 0 and its first read in one
  // request, one in five of what a node's join costs. Where the job is
  // past round 0 (a node that replaces one), the place it took there is
  // past that round's close: no one counts it, and Decide then sees the
  // round it joined is not the open one.
  if (p.joined_round < 0 && p.last_round < 0) {
    return Make(Action::kJoinFirstRound);
  }
  return Make(Action::kObserve);
}

// What a read that did not give the whole state calls for; nullopt when
// the read is whole.
std::optional<Action> AfterFailedRead(const Observed& o) {
  if (o.aborted.has_value()) return Make(Action::kEndJob);
  if (!o.state_error.ok()) {
    if (!Fatal(o.state_error)) return Make(Action::kReconnect);
    Action a = Make(Action::kFail);
    a.status = o.state_error;
    return a;
  }
  if (!o.malformed.ok()) {
    Action a = Make(Action::kFail);
    a.status = o.malformed;
    return a;
  }
  if (!o.rank_error.ok()) return Make(Action::kRetryRead);
  return std::nullopt;
}

// A member of the closed round `o.state`.
Action AsMember(const Observed& o, const Progress& p) {
  const RdzvState& st = o.state;
  if (st.round > p.last_round) return Make(Action::kReturnResult);
  bool forget_decider = false;
  if (st.round == p.decider_round) {
    // Another node's worker failed first in this round: that node restarts
    // the group (it opens the next round) or ends the job. Opening the
    // round here would pre-empt its decision; wait for it, unless that
    // node is gone (its lease expired) without deciding.
    if (o.decider_alive == true) return Make(Action::kAwaitDecider);
    forget_decider = o.decider_alive == false;
  }
  // Our own round ended: start the next one.
  Action a = Make(Action::kOpenNextRound);
  a.forget_decider = forget_decider;
  return a;
}

// An open round: join it with a key of this node's own (one request,
// never contended); the node that fills it, or the one whose last call
// ends first, closes it.
Action InOpenRound(const RdzvState& st, const Progress& p) {
  if (p.joined_round != st.round) return Make(Action::kJoin);
  if (!p.join_written) return Make(Action::kWriteJoinRecord);
  if (p.pending_restarts > st.restart_count) {
    return Make(Action::kNoteRestarts);
  }
  if (p.join_index == p.max_nodes) return Make(Action::kCloseRound);
  if (p.join_index >= p.min_nodes) {
    Action a = Make(Action::kAwaitLastCall);
    a.announce_last_call =
        p.join_index == p.min_nodes && p.announced_round != st.round;
    a.until = p.joined_at + p.last_call_timeout;
    if (a.until - p.now <= absl::ZeroDuration()) a.kind = Action::kCloseRound;
    return a;
  }
  // Who is there matters only if the join times out: follow the joiners
  // as the deadline nears, while the store is still up (its host, whose
  // deadline comes first, takes it away).
  Action a = Make(Action::kWaitForJoiners);
  a.follow_joiners = p.deadline - p.now <= 2 * p.keep_alive_interval;
  a.until = a.follow_joiners ? p.now + p.keep_alive_interval
                             : p.deadline - 2 * p.keep_alive_interval;
  return a;
}

}  // namespace

const char* ActionName(Action::Kind kind) {
  switch (kind) {
    case Action::kObserve:
      return "observe";
    case Action::kJoinFirstRound:
      return "join-first-round";
    case Action::kCancelled:
      return "cancelled";
    case Action::kStoreLost:
      return "store-lost";
    case Action::kTimedOut:
      return "timed-out";
    case Action::kFail:
      return "fail";
    case Action::kEndJob:
      return "end-job";
    case Action::kReconnect:
      return "reconnect";
    case Action::kRetryRead:
      return "retry-read";
    case Action::kReturnResult:
      return "return-result";
    case Action::kAwaitDecider:
      return "await-decider";
    case Action::kOpenNextRound:
      return "open-next-round";
    case Action::kWaitForNextRound:
      return "wait-for-next-round";
    case Action::kJoin:
      return "join";
    case Action::kWriteJoinRecord:
      return "write-join-record";
    case Action::kNoteRestarts:
      return "note-restarts";
    case Action::kAwaitLastCall:
      return "await-last-call";
    case Action::kCloseRound:
      return "close-round";
    case Action::kWaitForJoiners:
      return "wait-for-joiners";
  }
  return "?";
}

Action Decide(const Observed& o, const Progress& p) {
  if (!o.fresh) return BeforeRead(p);
  if (std::optional<Action> failed = AfterFailedRead(o)) return *failed;
  const RdzvState& st = o.state;
  if (st.closed && o.mine.has_value()) return AsMember(o, p);
  if (st.closed || (p.joined_round == st.round && p.join_index > p.max_nodes)) {
    // Someone else's round: ask for the next one. The members see the
    // waiting lease and re-form; if none of them is alive any more, the
    // waiting node opens the round itself (cannot tell: it waits, and
    // asks again).
    if (st.closed && o.members_alive == false) {
      return Make(Action::kOpenNextRound);
    }
    return Make(Action::kWaitForNextRound);
  }
  return InOpenRound(st, p);
}

bool RenewsLeaseFirst(Action::Kind kind) {
  switch (kind) {
    case Action::kObserve:
    case Action::kJoinFirstRound:
    case Action::kCancelled:
    case Action::kStoreLost:
    case Action::kTimedOut:
    case Action::kFail:
    case Action::kEndJob:
    case Action::kReconnect:
    case Action::kJoin:
    case Action::kWaitForNextRound:
      return false;
    case Action::kRetryRead:
    case Action::kReturnResult:
    case Action::kAwaitDecider:
    case Action::kOpenNextRound:
    case Action::kWriteJoinRecord:
    case Action::kNoteRestarts:
    case Action::kAwaitLastCall:
    case Action::kCloseRound:
    case Action::kWaitForJoiners:
      return true;
  }
  return true;
}

}  // namespace distjob
