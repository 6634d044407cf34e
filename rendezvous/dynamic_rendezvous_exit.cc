// How a DynamicRendezvous node leaves the job (Shutdown): the exit
// barrier after success, the job's end told to the others and waited for
// until they read it, and the store's host announcing that it leaves.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "rendezvous/dynamic_rendezvous.h"

namespace distjob {

void DynamicRendezvous::AcknowledgeEnd() {
  if (end_acknowledged_.exchange(true)) return;
  // The node that ended the job (maybe the store's host) waits for this
  // mark until its lease is up: a lost one is said, and the next caller
  // (the monitor, Next, Shutdown) writes it again.
  const std::string key = keys_.SeenEnd(options_.node);
  if (absl::Status s = store_->Set(key, "1").status(); !s.ok()) {
    WarnIfLost(absl::StrCat("mark the job's end as read at ", key), s);
    end_acknowledged_ = false;
  }
}

bool DynamicRendezvous::AllMarkedOrGone(
    const RdzvState& round, const std::string& marks_prefix,
    const std::function<std::optional<std::string>(absl::string_view)>&
        marked_node,
    std::optional<std::vector<RdzvParticipant>>* members,
    const std::set<std::string>& also_marked) {
  if (!members->has_value()) {
    auto m = ReadMembers(round.round, round.closer, round.size);
    if (!m.ok()) return true;  // no list to wait for
    *members = *std::move(m);
  }
  auto marks = store_->List(marks_prefix);
  auto alive = store_->List(keys_.AlivePrefix());
  if (!marks.ok() || !alive.ok()) {
    // The store is gone, or hangs (each listing waited read_timeout): the
    // goodbyes that follow get one keep-alive interval (Shutdown), not a
    // read_timeout each.
    const absl::Status& s = marks.ok() ? alive.status() : marks.status();
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      store_lost_ = true;
    }
    return true;
  }
  std::set<std::string> marked = also_marked, live;
  for (const auto& e : marks->entries) {
    if (auto node = marked_node(e.key); node.has_value()) marked.insert(*node);
  }
  for (const auto& e : alive->entries) {
    if (auto node = keys_.ParseAlive(e.key); node.has_value())
      live.insert(*node);
  }
  for (const auto& p : **members) {
    if (p.node == options_.node) continue;
    if (!marked.count(p.node) && live.count(p.node)) return false;
  }
  return true;
}

void DynamicRendezvous::AwaitEndSeen(const RdzvState& round) {
  wait_status_.Set(Wait::kEndSeen, round.round);
  const absl::Time until = absl::Now() + lease_;
  std::optional<std::vector<RdzvParticipant>> members;
  bool announced = false;
  while (absl::Now() < until) {
    auto listing = store_->List(keys_.SeenEndPrefix());
    if (!listing.ok()) return;
    if (AllMarkedOrGone(
            round, keys_.SeenEndPrefix(),
            [this](absl::string_view key) { return keys_.ParseSeenEnd(key); },
            &members)) {
      return;
    }
    if (!announced) {
      announced = true;
      DJ_LOG_INFO(
          "waiting (at most {}) for the other nodes to read why the job ended",
          absl::FormatDuration(until - absl::Now()));
    }
    if (!store_
             ->Watch(keys_.SeenEndPrefix(), listing->revision,
                     until - absl::Now())
             .ok()) {
      return;
    }
  }
  DJ_LOG_WARNING(
      "not every member read why the job ended within {}; closing the store",
      absl::FormatDuration(lease_));
}

bool DynamicRendezvous::ExitBarrier(const RdzvState& round) {
  wait_status_.Set(Wait::kExitBarrier, round.round, "", round.size);
  // Each node marks itself, and the one whose mark completes the count
  // says so with one key: N nodes wait on that key, not on each other's
  // marks (N x N wake-ups). A member that died never marks: checked, from
  // the leases, once per keep_alive_interval while the count falls short.
  const std::string all = keys_.DoneAll(round.round);
  // A mark or count that fails leaves the others waiting for this node
  // until its lease is seen gone or their deadline: said, and the wait
  // below leaves at once on a lost store.
  if (absl::Status s =
          store_->Set(keys_.Done(round.round, options_.node), "1").status();
      !s.ok()) {
    DJ_LOG_WARNING("exit barrier of round {}: cannot mark this node done: {}",
                   round.round, s.message());
  }
  auto count = store_->Add(keys_.DoneCount(round.round), 1);
  if (!count.ok()) {
    DJ_LOG_WARNING("exit barrier of round {}: cannot count this node: {}",
                   round.round, count.status().message());
  } else if (*count >= round.size) {
    if (absl::Status s = store_->Set(all, "1").status(); !s.ok()) {
      DJ_LOG_WARNING("exit barrier of round {}: cannot say all are done: {}",
                     round.round, s.message());
    }
  }
  const absl::Time deadline =
      absl::Now() + options_.config.exit_barrier_timeout;
  wait_status_.SetUntil(deadline);
  // A one-node round (or this node's mark completing it) waits for no one.
  if (count.ok() && *count >= round.size) return true;
  DJ_LOG_INFO(
      "exit barrier of round {}: waiting for the other nodes to finish (at "
      "most {})",
      round.round, absl::FormatDuration(options_.config.exit_barrier_timeout));
  std::optional<std::vector<RdzvParticipant>> members;
  while (absl::Now() < deadline) {
    auto v = store_->MultiGet(
        {all},
        std::min(options_.config.keep_alive_interval, deadline - absl::Now()));
    if (v.ok()) return true;
    if (!absl::IsDeadlineExceeded(v.status())) {
      // Cancelled by a stop, or the store failed (a hung etcd: the wait
      // found no member to hold it): no barrier to wait in.
      if (absl::IsUnavailable(v.status())) {
        store_lost_ = true;
        DJ_LOG_WARNING(
            "exit barrier of round {}: the rendezvous store does not answer "
            "({}); leaving without it (this node's workers succeeded)",
            round.round, v.status().message());
      }
      return false;
    }
    if (AllMarkedOrGone(
            round, keys_.DonePrefix(round.round),
            [&](absl::string_view key) {
              return keys_.ParseDone(key, round.round);
            },
            &members)) {
      if (store_lost_) {
        DJ_LOG_WARNING(
            "exit barrier of round {}: the rendezvous store does not answer; "
            "leaving without it (this node's workers succeeded)",
            round.round);
        return false;
      }
      return true;
    }
  }
  return false;
}

void DynamicRendezvous::AnnounceHostLeaving(const RdzvState& round) {
  wait_status_.Set(Wait::kHostLeaving, round.round);
  // A stop signal ended the barrier (Cancel closed this view: the host's
  // is a LocalStore, whose writes and reads still reach the core, but not
  // its waits). Without the key the others would find the store gone and
  // stop their workers after read_timeout, as if the host had crashed.
  const bool stopping = cancelled_;
  if (!store_->Set(keys_.HostLeft(), options_.node).ok()) return;
  DJ_LOG_INFO(
      "leaving {} while other nodes still run; they finish without the store",
      stopping ? "on a stop signal" : "after exit_barrier_timeout");
  // The members still running read the key on their monitor's next wake-up
  // (it is under ctl/, which each watches) and mark seen-end/; a member
  // that finished has left the ring. Stopping, the wait is a second at
  // most: the grace period is the others' workers', not this node's.
  const absl::Time until =
      absl::Now() + (stopping ? std::min(lease_, absl::Seconds(1)) : lease_);
  std::optional<std::vector<RdzvParticipant>> members;
  while (absl::Now() < until && cancelled_ == stopping) {
    auto seen = store_->List(keys_.SeenEndPrefix());
    if (!seen.ok()) return;
    std::set<std::string> acknowledged;
    for (const auto& e : seen->entries) {
      if (auto node = keys_.ParseSeenEnd(e.key); node.has_value()) {
        acknowledged.insert(*node);
      }
    }
    if (AllMarkedOrGone(
            round, keys_.DonePrefix(round.round),
            [&](absl::string_view key) {
              return keys_.ParseDone(key, round.round);
            },
            &members, acknowledged)) {
      return;
    }
    if (stopping) {
      absl::SleepFor(absl::Milliseconds(20));  // a closed view cannot wait
      continue;
    }
    if (!store_
             ->Watch(keys_.SeenEndPrefix(), seen->revision,
                     std::min(until - absl::Now(),
                              options_.config.keep_alive_interval))
             .ok()) {
      return;
    }
  }
}

void DynamicRendezvous::Abandon() {
  absl::MutexLock lock(&mu_);
  monitoring_ = false;
  abandoned_ = true;
  on_change_ = nullptr;
}

void DynamicRendezvous::Shutdown(bool succeeded) {
  {
    absl::MutexLock lock(&mu_);
    if (abandoned_) shut_down_ = true;  // nothing to announce
  }
  if (shut_down_) return;
  shut_down_ = true;
  RdzvState round;
  bool ended_by_another = false;
  {
    absl::MutexLock lock(&mu_);
    monitoring_ = false;
    round = current_;
    ended_by_another = !aborted_.empty();
  }
  if (host_left_) {
    // The store went with its host, after its workers succeeded: there is
    // nobody to wait for and nothing to tell.
    DJ_LOG_INFO("the rendezvous store's host has left; no exit barrier");
  } else if (!store_lost_ && last_round_ >= 0 && succeeded) {
    LeaveSucceeded(round);
  } else if (!store_lost_ && last_round_ >= 0 && ended_by_another) {
    // The key is there, and its writer, maybe the store's host, may be gone:
    // a write would only wait out read_timeout.
    AcknowledgeEnd();
  } else if (!store_lost_ && last_round_ >= 0) {
    // Without it the others learn the job ended only when this node's
    // lease expires: said, so that the wait they see is explained.
    WarnIfLost(
        absl::StrCat("end the job at ", keys_.Aborted()),
        store_
            ->Set(keys_.Aborted(),
                  absl::StrCat("node ", options_.node, " exited",
                               end_reason_.empty() ? "" : ": ", end_reason_))
            .status());
    if (options_.hosting) AwaitEndSeen(round);
  }
  closed_ = true;
  CloseStore();
  StopThreads();
  keep_alive_.reset();
}

void DynamicRendezvous::LeaveSucceeded(const RdzvState& round) {
  // Exit barrier: stay (and keep hosting the store) until every live
  // member of the round finished, so no node is torn down by another.
  const bool all_finished = ExitBarrier(round);
  const std::string left = keys_.Left(round.round);
  if (options_.hosting && !all_finished) {
    AnnounceHostLeaving(round);
  } else if (options_.hosting) {
    wait_status_.Set(Wait::kLeft, round.round);
    // Let the others read the barrier's outcome before the store goes.
    const int others = round.size - 1;
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (absl::Now() < until) {
      auto v = store_->Get(left, absl::ZeroDuration());
      int64_t n = 0;
      if (others <= 0 || (v.ok() && absl::SimpleAtoi(*v, &n) && n >= others))
        break;
      auto l = store_->List(left);
      if (!l.ok() ||
          !store_->Watch(left, l->revision, until - absl::Now()).ok()) {
        break;
      }
    }
  } else {
    // Brief: after a barrier that ended without everyone, the host may
    // be gone, and a call would wait out read_timeout.
    ScopedCallDeadline brief(all_finished && !store_lost_
                                 ? absl::InfiniteFuture()
                                 : absl::Now() +
                                       options_.config.keep_alive_interval);
    // A goodbye: without it the host waits for this node's count until
    // its 5 s are up. Said, not retried: the store leaves with the host.
    WarnIfLost(absl::StrCat("count this node's goodbye at ", left),
               store_->Add(left, 1).status());
  }
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

}  // namespace distjob
