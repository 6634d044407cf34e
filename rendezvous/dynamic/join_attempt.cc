#include "rendezvous/dynamic/join_attempt.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "rendezvous/protocol_version.h"
#include "rendezvous/round_info.h"

namespace distjob {

DynamicRendezvous::JoinAttempt::JoinAttempt(DynamicRendezvous* rdzv,
                                            int local_world_size)
    : rdzv_(rdzv),
      c_(rdzv->options_.config),
      local_world_size_(local_world_size),
      deadline_(absl::Now() + c_.join_timeout),
      fresh_(rdzv->lease_ - 2 * c_.keep_alive_interval),
      retry_(absl::Milliseconds(50),
             std::clamp(c_.keep_alive_interval, absl::Milliseconds(50),
                        absl::Seconds(2))) {}

absl::StatusOr<RendezvousResult> DynamicRendezvous::JoinAttempt::Run() {
  // join_timeout holds even when the store does not answer: no call made
  // while joining waits past it (each would otherwise wait read_timeout).
  ScopedCallDeadline join_deadline(deadline_);
  rdzv_->wait_status_.SetUntil(deadline_);
  struct NotWaiting {
    DynamicRendezvous* self;
    ~NotWaiting() { self->wait_status_.Set(Wait::kNone); }
  } not_waiting{rdzv_};
  if (absl::Status s = Begin(); !s.ok()) return s;
  next_start_ = absl::Now();
  for (;;) {
    const Action a =
        Decide(o_, rdzv_->CurrentProgress(deadline_, announced_round_));
    if (RenewsLeaseFirst(a.kind) && LeaseDue()) {
      if (auto s = rdzv_->node_lease_.Renew(); !s.ok()) {
        // A refused token is this pod's configuration: no wait fixes it.
        if (absl::IsUnauthenticated(s)) return s;
        DJ_LOG_WARNING("rendezvous heartbeat failed: {}", s.message());
      }
    }
    // Whatever changes the store or waits is followed by a new read.
    reread_ = true;
    if (Outcome done = Take(a); done.has_value()) return *std::move(done);
    if (reread_) o_.fresh = false;
  }
}

absl::Status DynamicRendezvous::JoinAttempt::Begin() {
  rdzv_->changed_ = false;
  RoundMonitor::Seen seen = rdzv_->monitor_.Pause();
  known_ = std::move(seen.reopened);
  known_revision_ = seen.reopened_revision;
  if (!seen.aborted.empty()) {
    return absl::AbortedError(absl::StrCat("the job ended: ", seen.aborted));
  }
  if (rdzv_->host_left_) {
    return absl::UnavailableError(
        "the rendezvous store's host left after its workers succeeded "
        "(exit_barrier_timeout): no further round");
  }
  if (rdzv_->store_lost_) {
    return absl::UnavailableError(absl::StrCat(
        "lost the rendezvous store: no answer within read_timeout (",
        absl::FormatDuration(c_.read_timeout), ")"));
  }
  return absl::OkStatus();
}

DynamicRendezvous::JoinAttempt::Outcome DynamicRendezvous::JoinAttempt::Take(
    const Action& a) {
  switch (a.kind) {
    case Action::kObserve:
      Observe();
      break;
    case Action::kJoinFirstRound:
      return JoinFirstRound();
    case Action::kCancelled:
      return absl::CancelledError("the rendezvous was cancelled");
    case Action::kStoreLost:
      return absl::UnavailableError(
          "lost the rendezvous store (read_timeout passed without an "
          "answer)");
    case Action::kTimedOut:
      return TimedOut();
    case Action::kFail:
      return a.status;
    case Action::kEndJob:
      return EndJob();
    case Action::kReconnect:
      return Reconnect();
    case Action::kRetryRead:
      PauseAfter(absl::StrCat("cannot read this node's rank in round ",
                              o_.state.round),
                 o_.rank_error);
      break;
    case Action::kReturnResult:
      return ReturnResult();
    case Action::kAwaitDecider:
      AwaitDecider();
      break;
    case Action::kOpenNextRound:
      OpenNextRound(a);
      break;
    case Action::kWaitForNextRound:
      WaitForNextRound();
      break;
    case Action::kJoin:
      Join();
      break;
    case Action::kWriteJoinRecord:
      WriteJoinRecord();
      break;
    case Action::kNoteRestarts:
      NoteRestarts();
      break;
    case Action::kAwaitLastCall:
      AwaitLastCall(a);
      break;
    case Action::kCloseRound:
      CloseRound(a);
      break;
    case Action::kWaitForJoiners:
      WaitForJoiners(a);
      break;
  }
  return std::nullopt;
}

void DynamicRendezvous::JoinAttempt::Observe() {
  o_ = rdzv_->observer_.Observe(&cache_, known_, known_revision_);
  known_.reset();
  reread_ = false;
  if (o_.aborted.has_value()) return;
  // The monitor may have read the job's end first and said it has (a
  // follower's AcknowledgeEnd): the node that ended the job then takes the
  // store away, maybe before this read. What the monitor read still ends
  // the join.
  if (std::string seen = rdzv_->monitor_.aborted(); !seen.empty()) {
    o_.aborted = std::move(seen);
  }
}

DynamicRendezvous::JoinAttempt::Outcome
DynamicRendezvous::JoinAttempt::JoinFirstRound() {
  const absl::Time start = absl::Now();
  const bool leasing = LeaseDue();
  std::vector<std::pair<std::string, std::string>> lease;
  if (leasing)
    lease.emplace_back(rdzv_->keys_.Alive(rdzv_->options_.node), "1");
  // Before its first join, the job's protocol version: an agent of
  // another one must not leave a record the others would misread.
  absl::Status checked = rdzv_->CheckProtocolOnce();
  if (IsRdzvProtocolMismatch(checked)) return checked;
  const RdzvKeys& keys = rdzv_->keys_;
  absl::StatusOr<AddRecordListing> j =
      checked.ok() ? rdzv_->store_->AddRecordThenList(
                         lease, rdzv_->lease_, keys.Joined(0), 1,
                         keys.JoinPrefix(0), JoinRecord(), keys.State())
                   : absl::StatusOr<AddRecordListing>(checked);
  if (!j.ok()) {
    // Not taken, or not known to be. As a first read's failure was
    // judged: a store not up yet waits for it (kReconnect), and a
    // request refused as malformed (a run id that makes its keys too
    // long) fails at once (kFail). Any other refusal is retried after
    // a pause, as a join's.
    const absl::Status& s = j.status();
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ||
        absl::IsUnauthenticated(s) || absl::IsInvalidArgument(s) ||
        absl::IsDataLoss(s)) {
      o_ = Observed();
      o_.fresh = true;
      o_.state_error = s;
      reread_ = false;
    } else {
      PauseAfter("cannot join round 0", s);
    }
    return std::nullopt;
  }
  if (leasing && j->add.leased) rdzv_->node_lease_.NoteRenewed(start);
  retry_.Reset();
  rdzv_->join_.joined_round = 0;
  rdzv_->join_.join_index = j->add.count;
  rdzv_->join_.join_written = j->add.recorded;
  rdzv_->join_.joined_at = absl::Now();
  DJ_LOG_DEBUG("round 0: joined as {}", rdzv_->join_.join_index);
  if (rdzv_->join_.join_index == 1) PublishInfo(0, std::nullopt);
  // What it read decides next, as a read of its own would; a read
  // that failed is made again.
  if (j->listing.ok()) {
    o_ = rdzv_->observer_.Observe(&cache_, std::nullopt, 0, &*j->listing);
    reread_ = false;
  }
  return std::nullopt;
}

absl::Status DynamicRendezvous::JoinAttempt::TimedOut() {
  // Why the store was never reached.
  const std::string unreached = rdzv_->wait_status_.StoreUnreached();
  const std::string& run_id = rdzv_->options_.run_id;
  if (!unreached.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "rendezvous '", run_id,
        "': the store was not reached "
        "within ",
        absl::FormatDuration(c_.join_timeout), " (join_timeout): ", unreached));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rendezvous '", run_id, "' did not complete within ",
                   absl::FormatDuration(c_.join_timeout), " (join_timeout)"));
}

absl::Status DynamicRendezvous::JoinAttempt::EndJob() {
  rdzv_->monitor_.SetAborted(*o_.aborted);
  rdzv_->exit_.AcknowledgeEnd();
  return absl::AbortedError(absl::StrCat("the job ended: ", *o_.aborted));
}

DynamicRendezvous::JoinAttempt::Outcome
DynamicRendezvous::JoinAttempt::Reconnect() {
  rdzv_->wait_status_.Set(Wait::kStore);
  rdzv_->wait_status_.SetStoreError(o_.state_error);
  if (auto s = rdzv_->node_lease_.Renew(); !s.ok()) {
    if (absl::IsUnauthenticated(s)) return s;
    // The heartbeat's own wait for the store may reach join_timeout: said
    // as the join's timeout, with why the store was not reached.
    if (absl::Now() >= deadline_) return TimedOut();
  }
  if (!announced_store_wait_) {
    // The first contact: the store may not be up yet.
    DJ_LOG_INFO("waiting for the rendezvous store: {}",
                o_.state_error.message());
    announced_store_wait_ = true;
  }
  // agent/stoppable_wait logs why, once per progress interval.
  PauseAfter("rendezvous store not reachable yet", o_.state_error,
             /*log=*/false);
  return std::nullopt;
}

absl::StatusOr<RendezvousResult>
DynamicRendezvous::JoinAttempt::ReturnResult() {
  rdzv_->node_lease_.StopAsking();
  // The round is closed: what follows reads the master's address
  // within close_timeout, whatever is left of join_timeout.
  ScopedCallDeadline after_join(absl::InfiniteFuture());
  auto result =
      rdzv_->Result(o_.state, *o_.mine, o_.state_revision, cache_.master);
  if (result.ok()) {
    result->peer_wait_seconds = absl::ToDoubleSeconds(peer_wait_);
  }
  return result;
}

void DynamicRendezvous::JoinAttempt::AwaitDecider() {
  rdzv_->wait_status_.Set(Wait::kDecider, o_.state.round,
                          rdzv_->failure_.decider());
  if (!announced_wait_) {
    DJ_LOG_INFO("waiting for node {} to restart or end the job",
                rdzv_->failure_.decider());
    announced_wait_ = true;
  }
  const absl::Time start = absl::Now();
  // A pause until the control key changes: the state is read
  // again whatever the watch answers.
  (void)rdzv_->store_->Watch(
      rdzv_->keys_.Ctl(), o_.revision,
      std::min(deadline_ - absl::Now(), c_.keep_alive_interval));
  peer_wait_ += absl::Now() - start;
}

void DynamicRendezvous::JoinAttempt::OpenNextRound(const Action& a) {
  if (a.forget_decider) rdzv_->failure_.ForgetDecider();
  const RdzvState next =
      NextRound(o_.state, rdzv_->failure_.pending_restarts());
  if (Cas(next)) {
    DJ_LOG_INFO("opened round {} of '{}'", next.round, rdzv_->options_.run_id);
  }
}

void DynamicRendezvous::JoinAttempt::WaitForNextRound() {
  const RdzvState& st = o_.state;
  rdzv_->wait_status_.Set(Wait::kNextRound, st.round);
  {
    // Members watch from their round's close on: a key written
    // before it (this node waited in an earlier round, or while this
    // one was still open) is written again with what changed.
    std::string value = absl::StrCat(st.round, st.closed ? " closed" : " full");
    const bool write = rdzv_->node_lease_.Ask(std::move(value));
    // Its ask and a due lease: one write.
    // A failed write is tried again when the lease is next due;
    // the next read sees a store that is gone.
    if (write || LeaseDue()) (void)rdzv_->node_lease_.Renew();
  }
  if (!announced_wait_) {
    DJ_LOG_INFO("round {} of '{}' is {}; waiting for the next round", st.round,
                rdzv_->options_.run_id, st.closed ? "closed" : "full");
    announced_wait_ = true;
  }
  if (auto s = WaitChange(deadline_ - absl::Now()); !s.ok()) {
    DJ_LOG_WARNING("rendezvous wait: {}", s.message());
  }
}

void DynamicRendezvous::JoinAttempt::Join() {
  const RdzvState& st = o_.state;
  const RdzvKeys& keys = rdzv_->keys_;
  // One request takes this node's place and writes its record there
  // (keys_.Join); where the store makes it two and the second failed,
  // kWriteJoinRecord writes the record again.
  const absl::Time start = absl::Now();
  const bool leasing = LeaseDue();
  auto k = leasing ? rdzv_->store_->LeaseThenAddRecord(
                         {{keys.Alive(rdzv_->options_.node), "1"}},
                         rdzv_->lease_, keys.Joined(st.round), 1,
                         keys.JoinPrefix(st.round), JoinRecord())
                   : rdzv_->store_->AddThenRecord(keys.Joined(st.round), 1,
                                                  keys.JoinPrefix(st.round),
                                                  JoinRecord());
  if (!k.ok()) {
    PauseAfter(absl::StrCat("cannot join round ", st.round), k.status());
    return;
  }
  if (leasing && k->leased) rdzv_->node_lease_.NoteRenewed(start);
  retry_.Reset();
  // In an open round its ask is answered: withdrawn now, while the
  // last round's members are re-forming, rather than once this round
  // closed, when the deletion would wake each member's monitor.
  rdzv_->node_lease_.StopAsking();
  rdzv_->join_.joined_round = st.round;
  rdzv_->join_.join_index = k->count;
  rdzv_->join_.join_written = k->recorded;
  rdzv_->join_.joined_at = absl::Now();
  DJ_LOG_DEBUG("round {}: joined as {}", st.round, rdzv_->join_.join_index);
  if (rdzv_->join_.join_index == 1) PublishInfo(st.round, std::nullopt);
  reread_ = false;  // decides again on the same read
}

void DynamicRendezvous::JoinAttempt::WriteJoinRecord() {
  const RdzvState& st = o_.state;
  const absl::Status written =
      rdzv_->store_
          ->Set(rdzv_->keys_.Join(st.round, rdzv_->join_.join_index),
                JoinRecord())
          .status();
  rdzv_->join_.join_written = written.ok();
  reread_ = !rdzv_->join_.join_written;
  if (!written.ok()) {
    PauseAfter(absl::StrCat("cannot write the join record of round ", st.round),
               written);
  }
}

void DynamicRendezvous::JoinAttempt::NoteRestarts() {
  RdzvState next = o_.state;
  next.restart_count = rdzv_->failure_.pending_restarts();
  // Lost to another writer: the next step decides on its state.
  (void)Cas(next);
}

void DynamicRendezvous::JoinAttempt::AwaitLastCall(const Action& a) {
  const RdzvState& st = o_.state;
  rdzv_->wait_status_.Set(Wait::kLastCall, st.round);
  if (a.announce_last_call) AnnounceLastCall(st);
  // The node whose join began the last call closes the round when
  // the call ends, unless one more node fills it: its records go in
  // now, while it would only wait, and the close is then the join
  // count and the compare-set. Once a round, by that one node: every
  // node in the last call writing them would be N records each.
  if (rdzv_->join_.join_index == rdzv_->options_.min_nodes &&
      rdzv_->prepared_round_ != st.round) {
    rdzv_->prepared_round_ = st.round;
    PublishInfo(st.round, a.until);
    if (auto s = rdzv_->close_.Write(st, /*ahead=*/true); !s.ok()) {
      DJ_LOG_DEBUG("round {}: cannot write its close ahead: {}", st.round,
                   s.message());
    }
  }
  // A pause: the state is read again whatever it answers.
  (void)WaitChange(a.until - absl::Now());
}

void DynamicRendezvous::JoinAttempt::CloseRound(const Action& a) {
  const RdzvState& st = o_.state;
  if (a.announce_last_call) AnnounceLastCall(st);
  const absl::Status written = rdzv_->close_.StillWritten(st)
                                   ? absl::OkStatus()
                                   : rdzv_->close_.Write(st);
  if (!written.ok()) {
    PauseAfter(absl::StrCat("cannot close round ", st.round), written);
  } else if (Cas(rdzv_->close_.State(st))) {
    DJ_LOG_DEBUG("round {}: closed it with {} members", st.round,
                 rdzv_->close_.size());
  }
}

void DynamicRendezvous::JoinAttempt::WaitForJoiners(const Action& a) {
  const RdzvState& st = o_.state;
  const DynamicRendezvousOptions& options = rdzv_->options_;
  rdzv_->wait_status_.Set(Wait::kJoiners, st.round);
  if (awaited_round_ != st.round) {
    awaited_round_ = st.round;
    DJ_LOG_INFO("round {} of '{}': waiting for nodes to join ({}..{})",
                st.round, options.run_id, options.min_nodes, options.max_nodes);
  }
  if (a.follow_joiners) {
    rdzv_->report_.NoteJoinedAddrs(st.round);
    near_deadline_ = true;
  }
  // Joins do not change the state: the round's close, its reopening
  // or the job's end do, and wake it.
  // A pause, as above.
  (void)WaitChange(std::max(a.until - absl::Now(), absl::ZeroDuration()),
                   /*capped=*/false);
}

// A lease renewed recently enough to outlast two more keep-alive
// intervals (the join and the round's close) needs no renewal here: it
// would only add a request per survivor to a recovery, when thousands
// re-join at once. A lease of fewer than three intervals
// (keep_alive_max_attempt < 3) is always due. A due lease goes with the
// join, in its request (LeaseThenAddRecord), or is renewed before any
// other step but a read: a new node's join is then one request fewer,
// which was one in six of a large round's requests (docs/bench).
// With a shorter lease the heartbeat thread keeps it, and Next renews
// it once, as the first step that needs it.
bool DynamicRendezvous::JoinAttempt::LeaseDue() const {
  return fresh_ <= absl::ZeroDuration()
             ? !rdzv_->node_lease_.RenewedSince(next_start_)
             : !rdzv_->node_lease_.RenewedWithin(fresh_);
}

std::string DynamicRendezvous::JoinAttempt::JoinRecord() const {
  const DynamicRendezvousOptions& o = rdzv_->options_;
  return EncodeJoin(
      {o.node, local_world_size_, o.addr, o.pod_index, o.order_key});
}

bool DynamicRendezvous::JoinAttempt::Cas(const RdzvState& next) {
  auto r =
      rdzv_->store_->CompareSet(rdzv_->keys_.State(), o_.raw, next.Encode());
  return r.ok() && r->swapped;
}

absl::Status DynamicRendezvous::JoinAttempt::WaitChange(absl::Duration timeout,
                                                        bool capped) {
  timeout =
      std::min({timeout, deadline_ - absl::Now(),
                capped ? c_.keep_alive_interval : absl::InfiniteDuration()});
  const absl::Time start = absl::Now();
  const RdzvKeys& keys = rdzv_->keys_;
  auto w = rdzv_->store_->WatchAny(
      {near_deadline_ ? keys.prefix() : keys.State()}, o_.revision, timeout);
  peer_wait_ += absl::Now() - start;
  if (w.ok() && !near_deadline_ && w->change.has_value()) {
    known_ = std::move(w->change);
    known_revision_ = w->revision;
  }
  return w.status();
}

void DynamicRendezvous::JoinAttempt::PauseAfter(absl::string_view what,
                                                const absl::Status& s,
                                                bool log) {
  // A call that Cancel ended is not a store failure: Next returns next.
  if (rdzv_->cancelled_) return;
  const absl::Duration pause = std::min(
      retry_.Next(), std::max(deadline_ - absl::Now(), absl::ZeroDuration()));
  // The first failure of a run of them, then one line per progress
  // interval: a store down for minutes is retried every 2 s.
  if (log && (retry_.attempts() == 1 || retry_log_.Due())) {
    DJ_LOG_WARNING(
        "{}: {} (attempt {}; retrying until {})", what, s.message(),
        retry_.attempts(),
        absl::FormatTime("%H:%M:%S UTC", deadline_, absl::UTCTimeZone()));
  }
  const absl::Time until = absl::Now() + pause;
  while (!rdzv_->cancelled_ && absl::Now() < until) {
    absl::SleepFor(std::min(absl::Milliseconds(50), until - absl::Now()));
  }
}

void DynamicRendezvous::JoinAttempt::PublishInfo(
    int64_t round, std::optional<absl::Time> last_call_ends) {
  const DynamicRendezvousOptions& o = rdzv_->options_;
  PublishRoundInfo(
      rdzv_->store_.get(), rdzv_->keys_.RoundInfo(round), round,
      {o.min_nodes, o.max_nodes, c_.last_call_timeout, last_call_ends});
}

void DynamicRendezvous::JoinAttempt::AnnounceLastCall(const RdzvState& st) {
  announced_round_ = st.round;
  DJ_LOG_INFO("round {}: {} of {}..{} nodes joined; last call for {}", st.round,
              rdzv_->join_.join_index, rdzv_->options_.min_nodes,
              rdzv_->options_.max_nodes,
              absl::FormatDuration(c_.last_call_timeout));
}

}  // namespace distjob
