#include "rendezvous/dynamic/dynamic_rendezvous.h"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"
#include "rendezvous/dynamic/join_attempt.h"
#include "rendezvous/dynamic/round_members.h"
#include "rendezvous/protocol_version.h"
#include "rendezvous/worker_store_record.h"

namespace distjob {
namespace {

// What a cancelled rendezvous gives the store to close (Cancel).
constexpr absl::Duration kCancelGoodbyes = absl::Milliseconds(500);

}  // namespace

DynamicRendezvous::DynamicRendezvous(DynamicRendezvousOptions options,
                                     std::unique_ptr<StoreInterface> store,
                                     std::shared_ptr<void> keep_alive)
    : options_(std::move(options)),
      keys_(options_.key_run_id.empty() ? options_.run_id
                                        : options_.key_run_id),
      lease_(options_.config.keep_alive_interval *
             options_.config.keep_alive_max_attempt),
      store_(std::move(store)),
      keep_alive_(std::move(keep_alive)),
      node_lease_(store_.get(), &keys_, options_.node, lease_,
                  options_.config.keep_alive_interval),
      exit_({store_.get(), &keys_, options_.node, options_.hosting,
             options_.config.exit_barrier_timeout,
             options_.config.keep_alive_interval, lease_, &wait_status_,
             &store_lost_, &cancelled_}),
      monitor_({store_.get(), &keys_, options_.node, options_.hosting,
                options_.max_nodes, options_.config.read_timeout,
                options_.config.keep_alive_interval, lease_, &exit_,
                &store_lost_, &host_left_, &changed_, &closed_}),
      failure_({store_.get(), &keys_, options_.node, &host_left_}),
      close_({store_.get(), &keys_, options_.node, options_.max_nodes, lease_}),
      master_({store_.get(), &keys_, options_.addr, options_.worker_store,
               options_.worker_store_off, options_.worker_store_port,
               options_.config.close_timeout,
               options_.config.worker_store_resolve_timeout, &cancelled_}) {
  if (options_.heartbeat_thread) {
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }
}

DynamicRendezvous::~DynamicRendezvous() {
  // Ends the monitor's watch in flight, which would otherwise hold the
  // join below for up to a lease; nothing else calls the store any more.
  closed_ = true;
  if (store_ != nullptr) store_->Close();
  StopThreads();
}

void DynamicRendezvous::StopThreads() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  monitor_.Stop();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void DynamicRendezvous::SetOnMembershipChange(std::function<void()> callback) {
  monitor_.SetOnChange(std::move(callback));
}

absl::Time DynamicRendezvous::NextRenewal(absl::Time last_attempt) const {
  return node_lease_.NextRenewal(last_attempt);
}

void DynamicRendezvous::HeartbeatLoop() {
  absl::Time last_attempt = absl::Now();
  for (;;) {
    const absl::Time next = NextRenewal(last_attempt);
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stop_), next)) return;
    }
    // A join may have renewed the lease during the wait.
    if (absl::Now() < NextRenewal(last_attempt)) continue;
    last_attempt = absl::Now();
    RenewLease();
  }
}

void DynamicRendezvous::RenewLease() {
  // No store to renew a lease in: its host left, or this node closed it
  // (Shutdown), whose last calls may take a while.
  if (host_left_ || closed_) return;
  const absl::Time start = absl::Now();
  const absl::Status s = node_lease_.Renew();
  if (s.ok()) {
    renew_failing_since_ = absl::InfiniteFuture();
    return;
  }
  renew_failing_since_ = std::min(renew_failing_since_, start);
  const bool joining = wait_status_.Get().wait == Wait::kStore;
  // Not reached yet: Next says so, once per progress interval.
  if (joining) {
    DJ_LOG_DEBUG("rendezvous heartbeat failed: {}", s.message());
    return;
  }
  DJ_LOG_WARNING("rendezvous heartbeat failed: {}", s.message());
  // A store that answers nothing (a hung etcd: its connections up, no
  // replies) can leave the monitor's watch open with no news for as long
  // as the connection lives. The lease it cannot renew is the loss:
  // read_timeout after the first failing renewal began, as a watch's.
  if (monitor_.monitoring() && !absl::IsUnauthenticated(s) &&
      !absl::IsCancelled(s) &&
      absl::Now() - renew_failing_since_ >= options_.config.read_timeout) {
    store_lost_ = true;
    monitor_.Fire(
        absl::StrCat("the rendezvous store is unreachable: ", s.message()));
  }
}

Progress DynamicRendezvous::CurrentProgress(absl::Time deadline,
                                            int64_t announced_round) const {
  Progress p;
  p.now = absl::Now();
  p.deadline = deadline;
  p.cancelled = cancelled_;
  p.store_lost = store_lost_;
  p.min_nodes = options_.min_nodes;
  p.max_nodes = options_.max_nodes;
  p.last_call_timeout = options_.config.last_call_timeout;
  p.keep_alive_interval = options_.config.keep_alive_interval;
  p.last_round = last_round_;
  p.decider_round = failure_.decider_round();
  p.pending_restarts = failure_.pending_restarts();
  p.joined_round = joined_round_;
  p.join_index = join_index_;
  p.join_written = join_written_;
  p.joined_at = joined_at_;
  p.announced_round = announced_round;
  return p;
}

absl::StatusOr<std::string> DynamicRendezvous::ReadRankRecord(
    const RdzvState& st, RankCache* cache) {
  const std::string rank_key = keys_.Rank(st.round, st.closer, options_.node);
  cache->master.reset();
  if (!IsKnownMember(st)) return store_->Get(rank_key, absl::ZeroDuration());
  // With the master's record, which group rank 0 writes once it has seen
  // the close: one request where two would be, as thousands of members
  // read at once. Within close_timeout, as Result's own read.
  ScopedCallDeadline after_join(absl::InfiniteFuture());
  auto both = store_->MultiGet({rank_key, keys_.Master(st.round)},
                               options_.config.close_timeout);
  if (both.ok()) {
    cache->master = std::move((*both)[1]);
    return std::move((*both)[0]);
  }
  if (!absl::IsDeadlineExceeded(both.status())) return both.status();
  // Rank 0 never wrote it: Result fails as its own read would have.
  cache->master = both.status();
  return store_->Get(rank_key, absl::ZeroDuration());
}

Observed DynamicRendezvous::Observe(RankCache* cache,
                                    const std::optional<WatchChange>& known,
                                    int64_t known_revision,
                                    StoreListing* listed) {
  Observed o;
  o.fresh = true;
  if (!ObserveState(known, known_revision, listed, &o)) return o;
  const RdzvState& st = o.state;
  if (st.closed && (st.round != cache->round || st.closer != cache->closer) &&
      !ObserveRank(st, cache, &o)) {
    return o;
  }
  if (st.closed) o.mine = cache->mine;
  if (o.mine.has_value() && st.round == failure_.decider_round()) {
    auto alive = store_->Check({keys_.Alive(failure_.decider())});
    if (alive.ok()) o.decider_alive = *alive;
  }
  if (st.closed && !o.mine.has_value()) ObserveMembersAlive(st, &o);
  return o;
}

bool DynamicRendezvous::ObserveState(const std::optional<WatchChange>& known,
                                     int64_t known_revision,
                                     StoreListing* listed, Observed* o) {
  if (known.has_value() && known->key == keys_.State() &&
      known->value.has_value()) {
    if (auto st = RdzvState::Decode(*known->value); st.ok()) {
      // What the watch said: a recovery's survivors, woken together by the
      // round's close, each skip a listing.
      o->revision = known_revision;
      o->state_revision = known->revision;
      o->raw = *known->value;
      o->state = *std::move(st);
      return true;
    }
  }
  // One request for the state and the job's end (rdzv_keys.h: both start
  // with the state's key), read by every node on every wake-up.
  auto listing = listed != nullptr
                     ? absl::StatusOr<StoreListing>(std::move(*listed))
                     : store_->List(keys_.State());
  if (!listing.ok()) {
    o->state_error = listing.status();
    return false;
  }
  for (auto& e : listing->entries) {
    if (e.key == keys_.Aborted()) {
      o->aborted = std::move(e.value);
      return false;
    }
  }
  o->revision = listing->revision;
  for (const auto& e : listing->entries) {
    if (e.key != keys_.State()) continue;
    o->raw = e.value;
    o->state_revision = e.revision;
    auto st = RdzvState::Decode(e.value);
    if (!st.ok()) {
      o->state_error = st.status();
      return false;
    }
    o->state = std::move(*st);
  }
  return true;
}

bool DynamicRendezvous::ObserveRank(const RdzvState& st, RankCache* cache,
                                    Observed* o) {
  auto rec = ReadRankRecord(st, cache);
  if (!rec.ok() && !absl::IsNotFound(rec.status())) {
    o->rank_error = rec.status();
    return false;
  }
  cache->mine.reset();
  if (rec.ok()) {
    auto r = DecodeRank(*rec);
    if (!r.ok()) {
      o->malformed = r.status();
      return false;
    }
    cache->mine = *std::move(r);
  }
  cache->round = st.round;
  cache->closer = st.closer;
  return true;
}

void DynamicRendezvous::ObserveMembersAlive(const RdzvState& st, Observed* o) {
  auto members = ReadMembers(st.round, st.closer, st.size);
  auto alive = store_->List(keys_.AlivePrefix());
  if (!members.ok() || !alive.ok()) return;
  std::set<std::string> live;
  for (const auto& e : alive->entries) live.insert(e.key);
  bool any_alive = false;
  absl::MutexLock lock(&seen_mu_);
  last_seen_.clear();
  for (const auto& p : *members) {
    any_alive |= live.count(keys_.Alive(p.node)) > 0;
    last_seen_.push_back(p.addr);
  }
  o->members_alive = any_alive;
}

absl::Status DynamicRendezvous::CheckProtocolOnce() {
  if (protocol_checked_) return absl::OkStatus();
  absl::Status s =
      CheckRdzvProtocol(store_.get(), keys_.Protocol(), RdzvProtocolVersion());
  protocol_checked_ = s.ok();
  return s;
}

absl::StatusOr<RendezvousResult> DynamicRendezvous::Next(int local_world_size) {
  return JoinAttempt(this, local_world_size).Run();
}

absl::StatusOr<std::vector<RdzvParticipant>> DynamicRendezvous::ReadMembers(
    int64_t round, const std::string& closer, int size) {
  return ReadRoundMembers(store_.get(), keys_, round, closer, size);
}

bool DynamicRendezvous::IsKnownMember(const RdzvState& st) const {
  return st.closed && !st.leader.empty() && st.leader != options_.node &&
         joined_round_ == st.round && join_written_ && join_index_ >= 1 &&
         join_index_ <= st.size;
}

absl::StatusOr<RendezvousResult> DynamicRendezvous::Result(
    const RdzvState& st, const RankRecord& mine, int64_t revision,
    const std::optional<absl::StatusOr<std::string>>& master) {
  RendezvousResult r;
  r.round = st.round;
  r.group_rank = mine.group_rank;
  r.group_world_size = st.size;
  r.base_rank = mine.base_rank;
  r.world_size = st.world_size;
  r.run_id = options_.run_id;
  r.restart_count = st.restart_count;
  if (absl::Status s = mine.group_rank == 0 ? master_.Write(st, &r)
                                            : master_.Read(st, master, &r);
      !s.ok()) {
    return s;
  }
  last_round_ = st.round;
  DJ_LOG_INFO(
      "round {} of '{}': group rank {} of {} nodes, first global rank {} of "
      "{}, master {}:{}, restarts {}",
      st.round, options_.run_id, r.group_rank, r.group_world_size, r.base_rank,
      r.world_size, r.master_addr, r.master_port, st.restart_count);
  monitor_.Hold(st, mine, revision);
  return r;
}

void DynamicRendezvous::NoteJoinedAddrs(int64_t round) {
  auto listing = store_->List(keys_.JoinPrefix(round));
  if (!listing.ok()) return;
  absl::MutexLock lock(&seen_mu_);
  last_seen_.clear();
  for (const auto& e : listing->entries) {
    auto p = DecodeJoin(e.value);
    if (p.ok() && std::find(last_seen_.begin(), last_seen_.end(), p->addr) ==
                      last_seen_.end()) {
      last_seen_.push_back(p->addr);
    }
  }
}

std::vector<std::string> DynamicRendezvous::LastSeenAddrs() const {
  absl::MutexLock lock(&seen_mu_);
  return last_seen_;
}

void DynamicRendezvous::Cancel() {
  cancelled_ = true;
  closed_ = true;
  // Ends the calls in flight. Its own goodbyes (etcd revokes this node's
  // leases) get half a second: a stop must end the agent within its grace
  // period whatever the store does, and a lease not revoked runs out.
  ScopedCallDeadline brief(absl::Now() + kCancelGoodbyes);
  store_->Close();
}

std::string DynamicRendezvous::WaitingFor() {
  const WaitStatus::Snapshot now = wait_status_.Get();
  const int64_t round = now.round;
  // One short read for the count: the store may be what does not answer.
  ScopedCallDeadline quick(absl::Now() + absl::Milliseconds(300));
  // A read, not Add(key, 0): a diagnostic must not write (a write wakes
  // every watcher of the prefix and would create a missing counter).
  auto count = [&](const std::string& key) -> std::string {
    auto v = store_->Get(key, absl::ZeroDuration());
    if (absl::IsNotFound(v.status())) return "0";
    int64_t n = 0;
    return v.ok() && absl::SimpleAtoi(*v, &n) ? absl::StrCat(n) : "?";
  };
  const std::string up_to = options_.min_nodes < options_.max_nodes
                                ? absl::StrCat(", up to ", options_.max_nodes)
                                : "";
  switch (now.wait) {
    case Wait::kNone:
      return "";
    case Wait::kStore:
      return "the rendezvous store (not reachable yet)";
    case Wait::kJoiners:
      // Also for LastSeenAddrs: who is missing from the round.
      NoteJoinedAddrs(round);
      return absl::StrCat("the rendezvous round ", round, " (",
                          count(keys_.Joined(round)), "/", options_.min_nodes,
                          " nodes joined", up_to, ")");
    case Wait::kLastCall:
      return absl::StrCat("the last call of rendezvous round ", round, " (",
                          count(keys_.Joined(round)), " nodes joined", up_to,
                          ")");
    case Wait::kNextRound:
      return absl::StrCat("the next rendezvous round (round ", round,
                          " is closed or full)");
    case Wait::kDecider:
      return absl::StrCat("node ", now.node, " to restart or end the job");
    case Wait::kExitBarrier:
      return absl::StrCat("the exit barrier of round ", round, " (",
                          count(keys_.DoneCount(round)), "/", now.size,
                          " nodes finished)");
    case Wait::kLeft:
      return "the other nodes to read the exit barrier's outcome";
    case Wait::kEndSeen:
      return "the other nodes to read why the job ended";
    case Wait::kHostLeaving:
      return "the nodes still running to read that the store's host leaves";
  }
  return "";
}

std::string DynamicRendezvous::WaitProgress() {
  std::string line = WaitingFor();
  if (line.empty()) return line;
  const WaitStatus::Snapshot now = wait_status_.Get();
  const int64_t round = now.round;
  ScopedCallDeadline quick(absl::Now() + absl::Milliseconds(300));
  std::string detail;
  switch (now.wait) {
    case Wait::kStore:
      detail = now.store_error;
      break;
    case Wait::kJoiners:
    case Wait::kLastCall:
      NoteJoinedAddrs(round);
      detail = NameList(LastSeenAddrs());
      if (!detail.empty()) detail = absl::StrCat("joined: ", detail);
      break;
    case Wait::kExitBarrier: {
      const RdzvState current = monitor_.current();
      if (current.round == round) detail = exit_.Unfinished(current);
      if (!detail.empty()) detail = absl::StrCat("not finished: ", detail);
      break;
    }
    default:
      break;
  }
  if (!detail.empty()) absl::StrAppend(&line, "; ", detail);
  if (now.until != absl::InfiniteFuture()) {
    absl::StrAppend(
        &line, "; until ",
        absl::FormatTime("%H:%M:%S UTC", now.until, absl::UTCTimeZone()));
  }
  return line;
}

void DynamicRendezvous::Abandon() { monitor_.Abandon(); }

void DynamicRendezvous::Shutdown(bool succeeded) {
  if (monitor_.abandoned()) shut_down_ = true;  // nothing to announce
  if (shut_down_) return;
  shut_down_ = true;
  const RoundMonitor::Seen seen = monitor_.Pause();
  const RdzvState& round = seen.current;
  const bool ended_by_another = !seen.aborted.empty();
  if (host_left_) {
    // The store went with its host, after its workers succeeded: there is
    // nobody to wait for and nothing to tell.
    DJ_LOG_INFO("the rendezvous store's host has left; no exit barrier");
  } else if (!store_lost_ && last_round_ >= 0 && succeeded) {
    exit_.LeaveSucceeded(round);
  } else if (!store_lost_ && last_round_ >= 0 && ended_by_another) {
    // The key is there, and its writer, maybe the store's host, may be gone:
    // a write would only wait out read_timeout.
    exit_.AcknowledgeEnd();
  } else if (!store_lost_ && last_round_ >= 0) {
    exit_.EndJob(round,
                 absl::StrCat("node ", options_.node, " exited",
                              end_reason_.empty() ? "" : ": ", end_reason_));
  }
  closed_ = true;
  CloseStore();
  StopThreads();
  keep_alive_.reset();
}

void DynamicRendezvous::CloseStore() {
  // A store that stopped answering, or that this node never formed a
  // round in (a join that timed out may have waited on a hung etcd),
  // gets a second at most for its goodbyes (etcd revokes this node's
  // leases on Close, which run out anyway), not each call's own budget
  // (read_timeout a revocation) on the way to a retryable exit.
  const absl::Time caller = ScopedCallDeadline::Current();
  const absl::Duration goodbyes =
      std::min(options_.config.keep_alive_interval, absl::Seconds(1));
  ScopedCallDeadline brief(store_lost_ || last_round_ < 0
                               ? std::min(caller, absl::Now() + goodbyes)
                               : caller);
  store_->Close();
}

void DynamicRendezvous::NoteFailureRestart(int restart_count) {
  failure_.NoteRestart(restart_count);
}

bool DynamicRendezvous::ClaimFailure() {
  return failure_.Claim(monitor_.current().round);
}

absl::Duration DynamicRendezvous::PeerLossWindow() const {
  // The lease, then the watch of the next member's lease and its new round:
  // one keep-alive interval is ample for that.
  return lease_ + options_.config.keep_alive_interval;
}

std::string DynamicRendezvous::SwapRootCause(const std::string& signature) {
  return failure_.SwapRootCause(signature);
}

void DynamicRendezvous::OfferRootFailure(const std::string& failure) {
  failure_.OfferRootFailure(monitor_.current().round, failure);
}

std::optional<std::string> DynamicRendezvous::OfferedRootFailure() {
  return failure_.OfferedRootFailure(monitor_.current().round);
}

}  // namespace distjob
