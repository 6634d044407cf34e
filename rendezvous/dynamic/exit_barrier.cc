#include "rendezvous/dynamic/exit_barrier.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "rendezvous/dynamic/round_members.h"

namespace distjob {
ExitBarrier::ExitBarrier(Deps deps) : d_(std::move(deps)) {}

void ExitBarrier::WarnIfLost(absl::string_view what, const absl::Status& s) {
  if (!s.ok()) DJ_LOG_WARNING("rendezvous: cannot {}: {}", what, s.message());
}

void ExitBarrier::AcknowledgeEnd() {
  if (end_acknowledged_.exchange(true)) return;
  // The node that ended the job (maybe the store's host) waits for this
  // mark until its lease is up: a lost one is said, and the next caller
  // (the monitor, Next, Shutdown) writes it again.
  const std::string key = d_.keys->SeenEnd(d_.node);
  if (absl::Status s = d_.store->Set(key, "1").status(); !s.ok()) {
    WarnIfLost(absl::StrCat("mark the job's end as read at ", key), s);
    end_acknowledged_ = false;
  }
}

bool ExitBarrier::AllMarkedOrGone(
    const RdzvState& round, const std::string& marks_prefix,
    const std::function<std::optional<std::string>(absl::string_view)>&
        marked_node,
    std::optional<std::vector<RdzvParticipant>>* members,
    const std::set<std::string>& also_marked) {
  if (!members->has_value()) {
    auto m = ReadRoundMembers(d_.store, *d_.keys, round.round, round.closer,
                              round.size);
    if (!m.ok()) return true;  // no list to wait for
    *members = *std::move(m);
  }
  auto marks = d_.store->List(marks_prefix);
  auto alive = d_.store->List(d_.keys->AlivePrefix());
  if (!marks.ok() || !alive.ok()) {
    // The store is gone, or hangs (each listing waited read_timeout): the
    // goodbyes that follow get one keep-alive interval (Shutdown), not a
    // read_timeout each.
    const absl::Status& s = marks.ok() ? alive.status() : marks.status();
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      *d_.store_lost = true;
    }
    return true;
  }
  std::set<std::string> marked = also_marked, live;
  for (const auto& e : marks->entries) {
    if (auto node = marked_node(e.key); node.has_value()) marked.insert(*node);
  }
  for (const auto& e : alive->entries) {
    if (auto node = d_.keys->ParseAlive(e.key); node.has_value())
      live.insert(*node);
  }
  for (const auto& p : **members) {
    if (p.node == d_.node) continue;
    if (!marked.count(p.node) && live.count(p.node)) return false;
  }
  return true;
}

void ExitBarrier::AwaitEndSeen(const RdzvState& round) {
  d_.wait_status->Set(RdzvWait::kEndSeen, round.round);
  const absl::Time until = absl::Now() + d_.lease;
  std::optional<std::vector<RdzvParticipant>> members;
  bool announced = false;
  while (absl::Now() < until) {
    auto listing = d_.store->List(d_.keys->SeenEndPrefix());
    if (!listing.ok()) return;
    if (AllMarkedOrGone(
            round, d_.keys->SeenEndPrefix(),
            [this](absl::string_view key) {
              return d_.keys->ParseSeenEnd(key);
            },
            &members)) {
      return;
    }
    if (!announced) {
      announced = true;
      DJ_LOG_INFO(
          "waiting (at most {}) for the other nodes to read why the job ended",
          absl::FormatDuration(until - absl::Now()));
    }
    if (!d_.store
             ->Watch(d_.keys->SeenEndPrefix(), listing->revision,
                     until - absl::Now())
             .ok()) {
      return;
    }
  }
  DJ_LOG_WARNING(
      "not every member read why the job ended within {}; closing the store",
      absl::FormatDuration(d_.lease));
}

bool ExitBarrier::Await(const RdzvState& round) {
  d_.wait_status->Set(RdzvWait::kExitBarrier, round.round, "", round.size);
  // Each node marks itself, and the one whose mark completes the count
  // says so with one key: N nodes wait on that key, not on each other's
  // marks (N x N wake-ups). A member that died never marks: checked, from
  // the leases, once per keep_alive_interval while the count falls short.
  const std::string all = d_.keys->DoneAll(round.round);
  // A mark or count that fails leaves the others waiting for this node
  // until its lease is seen gone or their deadline: said, and the wait
  // below leaves at once on a lost store.
  if (absl::Status s =
          d_.store->Set(d_.keys->Done(round.round, d_.node), "1").status();
      !s.ok()) {
    DJ_LOG_WARNING("exit barrier of round {}: cannot mark this node done: {}",
                   round.round, s.message());
  }
  auto count = d_.store->Add(d_.keys->DoneCount(round.round), 1);
  if (!count.ok()) {
    DJ_LOG_WARNING("exit barrier of round {}: cannot count this node: {}",
                   round.round, count.status().message());
  } else if (*count >= round.size) {
    if (absl::Status s = d_.store->Set(all, "1").status(); !s.ok()) {
      DJ_LOG_WARNING("exit barrier of round {}: cannot say all are done: {}",
                     round.round, s.message());
    }
  }
  const absl::Time deadline = absl::Now() + d_.exit_barrier_timeout;
  d_.wait_status->SetUntil(deadline);
  // A one-node round (or this node's mark completing it) waits for no one.
  if (count.ok() && *count >= round.size) return true;
  DJ_LOG_INFO(
      "exit barrier of round {}: waiting for the other nodes to finish (at "
      "most {})",
      round.round, absl::FormatDuration(d_.exit_barrier_timeout));
  std::optional<std::vector<RdzvParticipant>> members;
  while (absl::Now() < deadline) {
    auto v = d_.store->MultiGet(
        {all}, std::min(d_.keep_alive_interval, deadline - absl::Now()));
    if (v.ok()) return true;
    if (!absl::IsDeadlineExceeded(v.status())) {
      // Cancelled by a stop, or the store failed (a hung etcd: the wait
      // found no member to hold it): no barrier to wait in.
      if (absl::IsUnavailable(v.status())) {
        *d_.store_lost = true;
        DJ_LOG_WARNING(
            "exit barrier of round {}: the rendezvous store does not answer "
            "({}); leaving without it (this node's workers succeeded)",
            round.round, v.status().message());
      }
      return false;
    }
    if (AllMarkedOrGone(
            round, d_.keys->DonePrefix(round.round),
            [&](absl::string_view key) {
              return d_.keys->ParseDone(key, round.round);
            },
            &members)) {
      if (*d_.store_lost) {
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

void ExitBarrier::AnnounceHostLeaving(const RdzvState& round) {
  d_.wait_status->Set(RdzvWait::kHostLeaving, round.round);
  // A stop signal ended the barrier (Cancel closed this view: the host's
  // is a LocalStore, whose writes and reads still reach the core, but not
  // its waits). Without the key the others would find the store gone and
  // stop their workers after read_timeout, as if the host had crashed.
  const bool stopping = *d_.cancelled;
  if (!d_.store->Set(d_.keys->HostLeft(), d_.node).ok()) return;
  DJ_LOG_INFO(
      "leaving {} while other nodes still run; they finish without the store",
      stopping ? "on a stop signal" : "after exit_barrier_timeout");
  // The members still running read the key on their monitor's next wake-up
  // (it is under ctl/, which each watches) and mark seen-end/; a member
  // that finished has left the ring. Stopping, the wait is a second at
  // most: the grace period is the others' workers', not this node's.
  const absl::Time until =
      absl::Now() +
      (stopping ? std::min(d_.lease, absl::Seconds(1)) : d_.lease);
  std::optional<std::vector<RdzvParticipant>> members;
  while (absl::Now() < until && *d_.cancelled == stopping) {
    auto seen = d_.store->List(d_.keys->SeenEndPrefix());
    if (!seen.ok()) return;
    std::set<std::string> acknowledged;
    for (const auto& e : seen->entries) {
      if (auto node = d_.keys->ParseSeenEnd(e.key); node.has_value()) {
        acknowledged.insert(*node);
      }
    }
    if (AllMarkedOrGone(
            round, d_.keys->DonePrefix(round.round),
            [&](absl::string_view key) {
              return d_.keys->ParseDone(key, round.round);
            },
            &members, acknowledged)) {
      return;
    }
    if (stopping) {
      absl::SleepFor(absl::Milliseconds(20));  // a closed view cannot wait
      continue;
    }
    if (!d_.store
             ->Watch(d_.keys->SeenEndPrefix(), seen->revision,
                     std::min(until - absl::Now(), d_.keep_alive_interval))
             .ok()) {
      return;
    }
  }
}

void ExitBarrier::LeaveSucceeded(const RdzvState& round) {
  // Exit barrier: stay (and keep hosting the store) until every live
  // member of the round finished, so no node is torn down by another.
  const bool all_finished = Await(round);
  const std::string left = d_.keys->Left(round.round);
  if (d_.hosting && !all_finished) {
    AnnounceHostLeaving(round);
  } else if (d_.hosting) {
    d_.wait_status->Set(RdzvWait::kLeft, round.round);
    // Let the others read the barrier's outcome before the store goes.
    const int others = round.size - 1;
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (absl::Now() < until) {
      auto v = d_.store->Get(left, absl::ZeroDuration());
      int64_t n = 0;
      if (others <= 0 || (v.ok() && absl::SimpleAtoi(*v, &n) && n >= others))
        break;
      auto l = d_.store->List(left);
      if (!l.ok() ||
          !d_.store->Watch(left, l->revision, until - absl::Now()).ok()) {
        break;
      }
    }
  } else {
    // Brief: after a barrier that ended without everyone, the host may
    // be gone, and a call would wait out read_timeout.
    ScopedCallDeadline brief(all_finished && !*d_.store_lost
                                 ? absl::InfiniteFuture()
                                 : absl::Now() + d_.keep_alive_interval);
    // A goodbye: without it the host waits for this node's count until
    // its 5 s are up. Said, not retried: the store leaves with the host.
    WarnIfLost(absl::StrCat("count this node's goodbye at ", left),
               d_.store->Add(left, 1).status());
  }
}

void ExitBarrier::EndJob(const RdzvState& round, const std::string& why) {
  // Without it the others learn the job ended only when this node's
  // lease expires: said, so that the wait they see is explained.
  WarnIfLost(absl::StrCat("end the job at ", d_.keys->Aborted()),
             d_.store->Set(d_.keys->Aborted(), why).status());
  if (d_.hosting) AwaitEndSeen(round);
}

std::string ExitBarrier::Unfinished(const RdzvState& round) {
  auto members = ReadRoundMembers(d_.store, *d_.keys, round.round, round.closer,
                                  round.size);
  auto marks = d_.store->List(d_.keys->DonePrefix(round.round));
  if (!members.ok() || !marks.ok()) return "";
  std::set<std::string> marked;
  for (const auto& e : marks->entries) {
    if (auto node = d_.keys->ParseDone(e.key, round.round); node.has_value()) {
      marked.insert(*node);
    }
  }
  std::vector<std::string> missing;
  for (const RdzvParticipant& p : *members) {
    if (p.node != d_.node && !marked.count(p.node)) {
      missing.push_back(p.node);
    }
  }
  return NameList(missing);
}

}  // namespace distjob
