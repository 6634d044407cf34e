// How a DynamicRendezvous node sees its round end while its workers run:
// the monitor thread's watch of what ends a round (the state, a node
// waiting to join, the next member's lease, the job's end), and the
// judgement of what it saw, which Next's join shares.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "rendezvous/dynamic_rendezvous.h"

namespace distjob {

std::vector<std::string> DynamicRendezvous::MonitorPrefixes() {
  // The state's key is the prefix of the job's end and the host's leaving
  // (rdzv_keys.h). Other members' leases are left out: one lost lease
  // would wake every member, each to read the state and its own next
  // member's lease, thousands of requests around the one that matters.
  std::vector<std::string> prefixes = {keys_.State()};
  absl::MutexLock lock(&mu_);
  if (current_.size < options_.max_nodes) {
    prefixes.push_back(keys_.WaitingPrefix());
  }
  if (!watched_peer_.empty() && watched_peer_ != options_.node) {
    prefixes.push_back(keys_.Alive(watched_peer_));
  }
  return prefixes;
}

std::string DynamicRendezvous::Judge(bool liveness, int64_t* revision,
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
  auto listing = store_->List(keys_.State());
  if (!listing.ok()) return "";
  *revision = listing->revision;
  auto listed = [&](const std::string& key) -> const StoreEntry* {
    for (const auto& e : listing->entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  };
  if (const StoreEntry* ended = listed(keys_.Aborted()); ended != nullptr) {
    absl::MutexLock lock(&mu_);
    aborted_ = ended->value;
    return "the job was ended by another node";
  }
  if (!options_.hosting && !host_left_) {
    if (listed(keys_.HostLeft()) != nullptr) {
      DJ_LOG_INFO(
          "the rendezvous store's host leaves after its workers succeeded; "
          "this node finishes without the store");
      host_left_ = true;
      // The host waits for this before it takes the store away.
      AcknowledgeEnd();
      return "";
    }
  }
  std::string state_raw;
  for (const auto& e : listing->entries) {
    if (e.key != keys_.State()) continue;
    state_raw = e.value;
    auto st = RdzvState::Decode(e.value);
    if (st.ok() && (st->round != current.round || !st->closed)) {
      return absl::StrCat("round ", st->round, " began");
    }
  }
  if (current.size < options_.max_nodes) {
    if (std::string why = WaitingNode(); !why.empty()) return why;
  }
  if (!liveness) return "";
  return JudgeRing(current, mine, state_raw);
}

std::optional<std::string> DynamicRendezvous::JudgeChange(
    const WatchChange& change, const RdzvState& current,
    const std::string& watched, int64_t revision) {
  // The one change since the last look: when it tells all, no read (the
  // whole round's monitors wake together when the round reopens).
  if (change.key == keys_.State() && change.value.has_value()) {
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
  } else if (change.key == keys_.Aborted() && change.value.has_value()) {
    absl::MutexLock lock(&mu_);
    aborted_ = *change.value;
    return "the job was ended by another node";
  } else if (auto node = keys_.ParseWaiting(change.key); node.has_value()) {
    if (!change.value.has_value()) return "";  // it joined or left
    return absl::StrCat("node ", *node, " waits to join");
  } else if (auto node = keys_.ParseAlive(change.key);
             node.has_value() &&
             (change.value.has_value() || *node != watched)) {
    // A renewed lease, or another node's whose name starts with the
    // watched one's.
    return "";
  }
  return std::nullopt;
}

std::string DynamicRendezvous::JudgeRing(const RdzvState& current,
                                         const RankRecord& mine,
                                         const std::string& state_raw) {
  // The first live member before a lost one sees it lost. A member that
  // finished (done/) has left the ring: look past it.
  std::string peer = mine.next;
  for (int hops = 1; hops < current.size && peer != options_.node; ++hops) {
    auto alive = store_->Check({keys_.Alive(peer)});
    if (!alive.ok()) return "";
    if (*alive) {
      // Watched from here on: the members between finished.
      absl::MutexLock lock(&mu_);
      watched_peer_ = peer;
      return "";
    }
    auto done = store_->Check({keys_.Done(current.round, peer)});
    if (!done.ok()) return "";
    if (!*done) {
      // Only this node sees it: open the next round now, which every
      // member sees at once, rather than after this node stopped its
      // workers.
      const RdzvState next = NextRound(current, current.restart_count);
      if (!state_raw.empty()) {
        // Lost to another writer, or failed: the members' own lease
        // checks open the next round all the same, later.
        (void)store_->CompareSet(keys_.State(), state_raw, next.Encode());
      }
      return absl::StrCat("peer ", peer, " lost (no heartbeat for ",
                          absl::FormatDuration(lease_), ")");
    }
    auto rec = store_->Get(keys_.Rank(current.round, current.closer, peer),
                           absl::ZeroDuration());
    if (!rec.ok()) return "";
    auto next = DecodeRank(*rec);
    if (!next.ok()) return "";
    peer = next->next;
  }
  if (peer == options_.node) {
    // Every other member finished: no lease left to watch.
    absl::MutexLock lock(&mu_);
    watched_peer_.clear();
  }
  return "";
}

void DynamicRendezvous::Fire(const std::string& why) {
  std::function<void()> callback;
  {
    absl::MutexLock lock(&mu_);
    if (!monitoring_) return;
    monitoring_ = false;
    callback = on_change_;
  }
  DJ_LOG_WARNING("rendezvous membership changed: {}", why);
  changed_ = true;
  if (callback) callback();
}

void DynamicRendezvous::MonitorLoop() {
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
      generation = monitor_generation_;
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
      ScopedCallDeadline within_read_timeout(failing_since +
                                             options_.config.read_timeout);
      return store_->WatchAny(MonitorPrefixes(), revision, lease_);
    }();
    if (!w.ok()) {
      OnMonitorWatchFailed(w.status(), call_start, &failing_since);
      continue;
    }
    failing_since = absl::InfiniteFuture();
    if (w->changed) OnMonitorChange(*w, generation);
  }
}

void DynamicRendezvous::OnMonitorWatchFailed(const absl::Status& s,
                                             absl::Time call_start,
                                             absl::Time* failing_since) {
  {
    absl::MutexLock lock(&mu_);
    // This node closed the store (Cancel, Shutdown), or stopped watching
    // (it is leaving, and the host may be gone first): nothing to report.
    if (closed_) monitoring_ = false;
    if (!monitoring_) return;
    // Announced: the store went with its host, nothing more to watch.
    if (host_left_) {
      monitoring_ = false;
      return;
    }
  }
  // Unreachable since the call that failed began, not since it ended.
  *failing_since = std::min(*failing_since, call_start);
  DJ_LOG_WARNING("rendezvous store unreachable: {}", s.message());
  if (absl::Now() - *failing_since >= options_.config.read_timeout) {
    store_lost_ = true;
    Fire(absl::StrCat("the rendezvous store is unreachable: ", s.message()));
  }
  if (absl::Now() - call_start < absl::Milliseconds(100)) {
    // Refused at once (a store limit): pause as long as the watch would
    // have lasted, or until stopped, rather than loop and log hot.
    absl::MutexLock lock(&mu_);
    auto stopping = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping),
                         options_.config.keep_alive_interval);
  }
}

void DynamicRendezvous::OnMonitorChange(const WatchResult& w,
                                        uint64_t generation) {
  // Whether a later round's Result restarted the monitor meanwhile: what
  // this watch saw (that round opening) is then no news, and its revision
  // is older than the one Result set.
  {
    absl::MutexLock lock(&mu_);
    if (monitor_generation_ != generation) return;
  }
  int64_t judged_at = w.revision;
  const std::string why = Judge(/*liveness=*/true, &judged_at, w.change);
  bool ended = false;
  {
    absl::MutexLock lock(&mu_);
    if (monitor_generation_ != generation) return;
    current_revision_ = judged_at;
    ended = !aborted_.empty();
  }
  if (why.empty()) return;
  // The store's host may be ending the job: it waits for this before it
  // takes the store (and the reason) away.
  if (ended) AcknowledgeEnd();
  Fire(why);
}

}  // namespace distjob
