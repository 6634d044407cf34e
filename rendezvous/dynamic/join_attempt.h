// One call of DynamicRendezvous::Next: it reads the store, asks Decide
// (rendezvous/rdzv_decide.h) what to do, does it, and asks again until an
// action returns. What the call keeps between its steps (what it logged
// already, what its last wait saw change, its retry pause) is this class's;
// what outlives the call (this node's place in a round, its lease, the
// round it returned) stays the rendezvous'. One method per Decide action
// that does more than return a status, so that a step reads on its own
// and Decide keeps every choice.
//
// Private to DynamicRendezvous (a nested class: it reads and writes the
// rendezvous' own state, as Next did), built in the same library.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_JOIN_ATTEMPT_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_JOIN_ATTEMPT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/progress_log.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/dynamic/rdzv_decide.h"

namespace distjob {

class DynamicRendezvous::JoinAttempt {
 public:
  // Starts join_timeout's clock.
  JoinAttempt(DynamicRendezvous* rdzv, int local_world_size);
  JoinAttempt(const JoinAttempt&) = delete;
  JoinAttempt& operator=(const JoinAttempt&) = delete;

  // Next's answer: this node's result in the round it ends in, or why not.
  absl::StatusOr<RendezvousResult> Run();

 private:
  // What a step leaves: nothing (Run asks Decide again) or Next's answer.
  using Outcome = std::optional<absl::StatusOr<RendezvousResult>>;

  // Takes what the monitor saw since the last call; an error if the job
  // ended, the store's host left or the store was lost before this call.
  absl::Status Begin();
  // Does what `a` says, one method per Action::Kind.
  Outcome Take(const Action& a);

  // The steps.
  void Observe();
  Outcome JoinFirstRound();
  absl::Status TimedOut();
  absl::Status EndJob();
  Outcome Reconnect();
  absl::StatusOr<RendezvousResult> ReturnResult();
  void AwaitDecider();
  void OpenNextRound(const Action& a);
  void WaitForNextRound();
  void Join();
  void WriteJoinRecord();
  void NoteRestarts();
  void AwaitLastCall(const Action& a);
  void CloseRound(const Action& a);
  void WaitForJoiners(const Action& a);

  // What the steps share.
  // Whether this node's lease needs renewing before a step that holds it.
  bool LeaseDue() const;
  std::string JoinRecord() const;
  // Whether this node's compare-set of the state took (another node's may
  // have).
  bool Cas(const RdzvState& next);
  // Waits for a change of the state (near the deadline: of any key of the
  // job) after the last read, at most `timeout`; `capped`: also wakes every
  // keep_alive_interval, where what is waited for (a lease running out)
  // changes nothing under ctl/state.
  absl::Status WaitChange(absl::Duration timeout, bool capped = true);
  // A failed store operation is retried after a pause, so a store that
  // refuses every write (or is not up yet) costs neither a core nor a log
  // line per attempt; the pause ends early on Cancel. `log`: false where
  // the wait's progress lines already say why.
  void PauseAfter(absl::string_view what, const absl::Status& s,
                  bool log = true);
  // For `status` (round_info.h): by the round's first joiner, and with the
  // last call's end by the node whose join began it.
  void PublishInfo(int64_t round, std::optional<absl::Time> last_call_ends);
  void AnnounceLastCall(const RdzvState& st);

  DynamicRendezvous* const rdzv_;
  const RdzvConfig& c_;
  const int local_world_size_;
  const absl::Time deadline_;
  // A lease renewed within `fresh_` needs no renewal (see LeaseDue); Run's
  // start, for a lease too short for that.
  const absl::Duration fresh_;
  absl::Time next_start_;

  int64_t announced_round_ = -1;  // whose last call was logged
  int64_t awaited_round_ = -1;    // whose wait for joiners was logged
  bool announced_wait_ = false;
  bool announced_store_wait_ = false;
  bool near_deadline_ = false;  // then waits also end on a join
  // What the last wait saw change under the state's prefix (see
  // RoundObserver::Observe): first, what the monitor saw reopen the
  // round.
  std::optional<WatchChange> known_;
  int64_t known_revision_ = 0;
  RoundObserver::RankCache cache_;
  Observed o_;  // nothing read yet
  absl::Duration peer_wait_ = absl::ZeroDuration();
  Backoff retry_;
  ProgressLog retry_log_;
  // Set by a step whose store change or wait makes the next one read
  // again; a step that read, or decides again on the same read, clears it.
  bool reread_ = true;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_JOIN_ATTEMPT_H_
