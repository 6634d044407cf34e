#include "rendezvous/dynamic/dynamic_rendezvous.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "rendezvous/dynamic/join_attempt.h"
#include "rendezvous/protocol_version.h"

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
               options_.config.worker_store_resolve_timeout, &cancelled_}),
      report_({store_.get(), &keys_, options_.min_nodes, options_.max_nodes,
               &wait_status_, &monitor_, &exit_}),
      observer_({store_.get(), &keys_, options_.node,
                 options_.config.close_timeout, &join_, &failure_, &report_}) {
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
  p.joined_round = join_.joined_round;
  p.join_index = join_.join_index;
  p.join_written = join_.join_written;
  p.joined_at = join_.joined_at;
  p.announced_round = announced_round;
  return p;
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

void DynamicRendezvous::Cancel() {
  cancelled_ = true;
  closed_ = true;
  // Ends the calls in flight. Its own goodbyes (etcd revokes this node's
  // leases) get half a second: a stop must end the agent within its grace
  // period whatever the store does, and a lease not revoked runs out.
  ScopedCallDeadline brief(absl::Now() + kCancelGoodbyes);
  store_->Close();
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

std::string DynamicRendezvous::SwapRootCause(const std::string& record) {
  return failure_.SwapRootCause(record);
}

void DynamicRendezvous::OfferFailure(OfferedFailureKind kind,
                                     const std::string& failure) {
  failure_.OfferFailure(monitor_.current().round, kind, failure);
}

std::optional<std::string> DynamicRendezvous::OfferedFailure(
    OfferedFailureKind kind) {
  return failure_.OfferedFailure(monitor_.current().round, kind);
}

std::vector<std::string> DynamicRendezvous::LastSeenAddrs() const {
  return report_.LastSeenAddrs();
}

std::string DynamicRendezvous::WaitingFor() { return report_.WaitingFor(); }

std::string DynamicRendezvous::WaitProgress() { return report_.WaitProgress(); }

}  // namespace distjob
