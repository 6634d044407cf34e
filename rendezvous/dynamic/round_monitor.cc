#include "rendezvous/dynamic/round_monitor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace distjob {

RoundMonitor::RoundMonitor(Deps deps) : d_(std::move(deps)) {}

RoundMonitor::~RoundMonitor() { Stop(); }

void RoundMonitor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void RoundMonitor::SetOnChange(std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  on_change_ = std::move(callback);
}

void RoundMonitor::Hold(const RdzvState& st, const RankRecord& mine,
                        int64_t revision) {
  absl::MutexLock lock(&mu_);
  current_ = st;
  current_rank_ = mine;
  watched_peer_ = mine.next;
  // The watch starts from the revision the round was closed at: a change
  // made since (a fast peer's worker failed and opened the next round
  // while this node was still reading the one that closed, a node asked
  // to join, the next member's lease ran out) fires at once. A node asks
  // to join only once it saw the round closed (or full), so this needs no
  // listing of the waiting nodes per member, which a recovery's survivors
  // all made at once.
  current_revision_ = revision;
  monitoring_ = !abandoned_;
  ++generation_;
  if (!stop_ && !thread_.joinable()) {
    thread_ = std::thread([this] { Loop(); });
  }
}

RoundMonitor::Seen RoundMonitor::Pause() {
  absl::MutexLock lock(&mu_);
  monitoring_ = false;
  Seen seen;
  seen.reopened = std::move(reopened_);
  reopened_.reset();
  seen.reopened_revision = reopened_revision_;
  seen.aborted = aborted_;
  seen.current = current_;
  return seen;
}

void RoundMonitor::Abandon() {
  absl::MutexLock lock(&mu_);
  monitoring_ = false;
  abandoned_ = true;
  on_change_ = nullptr;
}

bool RoundMonitor::abandoned() const {
  absl::MutexLock lock(&mu_);
  return abandoned_;
}

bool RoundMonitor::monitoring() const {
  absl::MutexLock lock(&mu_);
  return monitoring_;
}

RdzvState RoundMonitor::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

std::string RoundMonitor::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

void RoundMonitor::SetAborted(std::string why) {
  absl::MutexLock lock(&mu_);
  aborted_ = std::move(why);
}

std::string RoundMonitor::WaitingNode() {
  auto waiting = d_.store->List(d_.keys->WaitingPrefix());
  if (!waiting.ok()) return "";
  for (const auto& e : waiting->entries) {
    if (auto node = d_.keys->ParseWaiting(e.key); node.has_value()) {
      return absl::StrCat("node ", *node, " waits to join");
    }
  }
  return "";
}

std::vector<std::string> RoundMonitor::Prefixes() {
  // The state's key is the prefix of the job's end and the host's leaving
  // (rdzv_keys.h). Other members' leases are left out: one lost lease
  // would wake every member, each to read the state and its own next
  // member's lease, thousands of requests around the one that matters.
  std::vector<std::string> prefixes = {d_.keys->State()};
  absl::MutexLock lock(&mu_);
  if (current_.size < d_.max_nodes) {
    prefixes.push_back(d_.keys->WaitingPrefix());
  }
  if (!watched_peer_.empty() && watched_peer_ != d_.node) {
    prefixes.push_back(d_.keys->Alive(watched_peer_));
  }
  return prefixes;
}

std::string RoundMonitor::Judge(bool liveness, int64_t* revision,
                                const std::optional<WatchChange>& change) {
  RdzvState current;
  RankRecord mine;
  std::string watched;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
    mine = current_rank_;
    watched = watched_peer_;
  }
  if (change.has_value()) {
    if (std::optional<std::string> why =
            JudgeChange(*change, current, watched, *revision);
        why.has_value()) {
      return *why;
    }
  }
  // A few small reads, whatever the job's size: the state with the job's
  // end and the host's leaving (one listing), the waiting nodes, and the
  // lease of the next member in rank order.
  auto listing = d_.store->List(d_.keys->State());
  if (!listing.ok()) return "";
  *revision = listing->revision;
  auto listed = [&](const std::string& key) -> const StoreEntry* {
    for (const auto& e : listing->entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  };
  if (const StoreEntry* ended = listed(d_.keys->Aborted()); ended != nullptr) {
    absl::MutexLock lock(&mu_);
    aborted_ = ended->value;
    return "the job was ended by another node";
  }
  if (!d_.hosting && !*d_.host_left) {
    if (listed(d_.keys->HostLeft()) != nullptr) {
      DJ_LOG_INFO(
          "the rendezvous store's host leaves after its workers succeeded; "
          "this node finishes without the store");
      *d_.host_left = true;
      // The host waits for this before it takes the store away.
      d_.exit->AcknowledgeEnd();
      return "";
    }
  }
  std::string state_raw;
  for (const auto& e : listing->entries) {
    if (e.key != d_.keys->State()) continue;
    state_raw = e.value;
    auto st = RdzvState::Decode(e.value);
    if (st.ok() && (st->round != current.round || !st->closed)) {
      return absl::StrCat("round ", st->round, " began");
    }
  }
  if (current.size < d_.max_nodes) {
    if (std::string why = WaitingNode(); !why.empty()) return why;
  }
  if (!liveness) return "";
  return JudgeRing(current, mine, state_raw);
}

std::optional<std::string> RoundMonitor::JudgeChange(const WatchChange& change,
                                                     const RdzvState& current,
                                                     const std::string& watched,
                                                     int64_t revision) {
  // The one change since the last look: when it tells all, no read (the
  // whole round's monitors wake together when the round reopens).
  if (change.key == d_.keys->State() && change.value.has_value()) {
    auto st = RdzvState::Decode(*change.value);
    if (st.ok() && (st->round != current.round || !st->closed)) {
      absl::MutexLock lock(&mu_);
      // Only for the Next this wakes (it stops monitoring first).
      if (monitoring_) {
        reopened_ = change;
        reopened_revision_ = revision;
      }
      return absl::StrCat("round ", st->round, " began");
    }
  } else if (change.key == d_.keys->Aborted() && change.value.has_value()) {
    absl::MutexLock lock(&mu_);
    aborted_ = *change.value;
    return "the job was ended by another node";
  } else if (auto node = d_.keys->ParseWaiting(change.key); node.has_value()) {
    if (!change.value.has_value()) return "";  // it joined or left
    return absl::StrCat("node ", *node, " waits to join");
  } else if (auto node = d_.keys->ParseAlive(change.key);
             node.has_value() &&
             (change.value.has_value() || *node != watched)) {
    // A renewed lease, or another node's whose name starts with the
    // watched one's.
    return "";
  }
  return std::nullopt;
}

std::string RoundMonitor::JudgeRing(const RdzvState& current,
                                    const RankRecord& mine,
                                    const std::string& state_raw) {
  // The first live member before a lost one sees it lost. A member that
  // finished (done/) has left the ring: look past it.
  std::string peer = mine.next;
  for (int hops = 1; hops < current.size && peer != d_.node; ++hops) {
    auto alive = d_.store->Check({d_.keys->Alive(peer)});
    if (!alive.ok()) return "";
    if (*alive) {
      // Watched from here on: the members between finished.
      absl::MutexLock lock(&mu_);
      watched_peer_ = peer;
      return "";
    }
    auto done = d_.store->Check({d_.keys->Done(current.round, peer)});
    if (!done.ok()) return "";
    if (!*done) {
      // Only this node sees it: open the next round now, which every
      // member sees at once, rather than after this node stopped its
      // workers.
      const RdzvState next = NextRound(current, current.restart_count);
      if (!state_raw.empty()) {
        // Lost to another writer, or failed: the members' own lease
        // checks open the next round all the same, later.
        (void)d_.store->CompareSet(d_.keys->State(), state_raw, next.Encode());
      }
      return absl::StrCat("peer ", peer, " lost (no heartbeat for ",
                          absl::FormatDuration(d_.lease), ")");
    }
    auto rec = d_.store->Get(d_.keys->Rank(current.round, current.closer, peer),
                             absl::ZeroDuration());
    if (!rec.ok()) return "";
    auto next = DecodeRank(*rec);
    if (!next.ok()) return "";
    peer = next->next;
  }
  if (peer == d_.node) {
    // Every other member finished: no lease left to watch.
    absl::MutexLock lock(&mu_);
    watched_peer_.clear();
  }
  return "";
}

void RoundMonitor::Fire(const std::string& why) {
  std::function<void()> callback;
  {
    absl::MutexLock lock(&mu_);
    if (!monitoring_) return;
    monitoring_ = false;
    callback = on_change_;
  }
  DJ_LOG_WARNING("rendezvous membership changed: {}", why);
  *d_.changed = true;
  if (callback) callback();
}

void RoundMonitor::Loop() {
  absl::Time failing_since = absl::InfiniteFuture();
  for (;;) {
    int64_t revision;
    uint64_t generation;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || monitoring_;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      revision = current_revision_;
      generation = generation_;
    }
    const absl::Time call_start = absl::Now();
    // Once the store fails, the loss is due read_timeout after the failing
    // call began: a watch retried meanwhile waits for the store to come
    // back, and without this bound would report the loss its own wait plus
    // read_timeout later (the host killed mid-training: ~2 keep-alives late).
    // Only what ends the round wakes it (MonitorPrefixes): a running
    // round's bookkeeping (joins, records, the exit barrier) would wake
    // every node on every write, another member's lost lease every member.
    // Re-armed once a lease, not every keep_alive_interval: what ends the
    // round (the state, a waiting node, the next member's lease running
    // out) answers the watch itself, so an earlier timeout only costs a
    // request per member and second, ~2 per survivor of a recovery of
    // 4,096 nodes (bench/store_bench.cc's by_method) while the lost
    // lease runs out. A store that stops answering altogether is still
    // seen lost within a lease plus read_timeout.
    auto w = [&] {
      ScopedCallDeadline within_read_timeout(failing_since + d_.read_timeout);
      return d_.store->WatchAny(Prefixes(), revision, d_.lease);
    }();
    if (!w.ok()) {
      OnWatchFailed(w.status(), call_start, &failing_since);
      continue;
    }
    failing_since = absl::InfiniteFuture();
    if (w->changed) OnChange(*w, generation);
  }
}

void RoundMonitor::OnWatchFailed(const absl::Status& s, absl::Time call_start,
                                 absl::Time* failing_since) {
  {
    absl::MutexLock lock(&mu_);
    // This node closed the store (Cancel, Shutdown), or stopped watching
    // (it is leaving, and the host may be gone first): nothing to report.
    if (*d_.closed) monitoring_ = false;
    if (!monitoring_) return;
    // Announced: the store went with its host, nothing more to watch.
    if (*d_.host_left) {
      monitoring_ = false;
      return;
    }
  }
  // Unreachable since the call that failed began, not since it ended.
  *failing_since = std::min(*failing_since, call_start);
  DJ_LOG_WARNING("rendezvous store unreachable: {}", s.message());
  if (absl::Now() - *failing_since >= d_.read_timeout) {
    *d_.store_lost = true;
    Fire(absl::StrCat("the rendezvous store is unreachable: ", s.message()));
  }
  if (absl::Now() - call_start < absl::Milliseconds(100)) {
    // Refused at once (a store limit): pause as long as the watch would
    // have lasted, or until stopped, rather than loop and log hot.
    absl::MutexLock lock(&mu_);
    auto stopping = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), d_.keep_alive_interval);
  }
}

void RoundMonitor::OnChange(const WatchResult& w, uint64_t generation) {
  // Whether a later round's Result restarted the monitor meanwhile: what
  // this watch saw (that round opening) is then no news, and its revision
  // is older than the one Result set.
  {
    absl::MutexLock lock(&mu_);
    if (generation_ != generation) return;
  }
  int64_t judged_at = w.revision;
  const std::string why = Judge(/*liveness=*/true, &judged_at, w.change);
  bool ended = false;
  {
    absl::MutexLock lock(&mu_);
    if (generation_ != generation) return;
    current_revision_ = judged_at;
    ended = !aborted_.empty();
  }
  if (why.empty()) return;
  // The store's host may be ending the job: it waits for this before it
  // takes the store (and the reason) away.
  if (ended) d_.exit->AcknowledgeEnd();
  Fire(why);
}

}  // namespace distjob
