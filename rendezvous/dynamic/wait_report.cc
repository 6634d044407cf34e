#include "rendezvous/dynamic/wait_report.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/dynamic/round_members.h"
#include "rendezvous/rdzv_state.h"

namespace distjob {

WaitReport::WaitReport(Deps deps) : d_(std::move(deps)) {}

void WaitReport::SetLastSeen(std::vector<std::string> addrs) {
  absl::MutexLock lock(&mu_);
  last_seen_ = std::move(addrs);
}

std::string WaitReport::WaitingFor() {
  const WaitStatus::Snapshot now = d_.wait_status->Get();
  const int64_t round = now.round;
  // One short read for the count: the store may be what does not answer.
  ScopedCallDeadline quick(absl::Now() + absl::Milliseconds(300));
  // A read, not Add(key, 0): a diagnostic must not write (a write wakes
  // every watcher of the prefix and would create a missing counter).
  auto count = [&](const std::string& key) -> std::string {
    auto v = d_.store->Get(key, absl::ZeroDuration());
    if (absl::IsNotFound(v.status())) return "0";
    int64_t n = 0;
    return v.ok() && absl::SimpleAtoi(*v, &n) ? absl::StrCat(n) : "?";
  };
  const std::string up_to =
      d_.min_nodes < d_.max_nodes ? absl::StrCat(", up to ", d_.max_nodes) : "";
  switch (now.wait) {
    case RdzvWait::kNone:
      return "";
    case RdzvWait::kStore:
      return "the rendezvous store (not reachable yet)";
    case RdzvWait::kJoiners:
      // Also for LastSeenAddrs: who is missing from the round.
      NoteJoinedAddrs(round);
      return absl::StrCat("the rendezvous round ", round, " (",
                          count(d_.keys->Joined(round)), "/", d_.min_nodes,
                          " nodes joined", up_to, ")");
    case RdzvWait::kLastCall:
      return absl::StrCat("the last call of rendezvous round ", round, " (",
                          count(d_.keys->Joined(round)), " nodes joined", up_to,
                          ")");
    case RdzvWait::kNextRound:
      return absl::StrCat("the next rendezvous round (round ", round,
                          " is closed or full)");
    case RdzvWait::kDecider:
      return absl::StrCat("node ", now.node, " to restart or end the job");
    case RdzvWait::kExitBarrier:
      return absl::StrCat("the exit barrier of round ", round, " (",
                          count(d_.keys->DoneCount(round)), "/", now.size,
                          " nodes finished)");
    case RdzvWait::kLeft:
      return "the other nodes to read the exit barrier's outcome";
    case RdzvWait::kEndSeen:
      return "the other nodes to read why the job ended";
    case RdzvWait::kHostLeaving:
      return "the nodes still running to read that the store's host leaves";
  }
  return "";
}

std::string WaitReport::WaitProgress() {
  std::string line = WaitingFor();
  if (line.empty()) return line;
  const WaitStatus::Snapshot now = d_.wait_status->Get();
  const int64_t round = now.round;
  ScopedCallDeadline quick(absl::Now() + absl::Milliseconds(300));
  std::string detail;
  switch (now.wait) {
    case RdzvWait::kStore:
      detail = now.store_error;
      break;
    case RdzvWait::kJoiners:
    case RdzvWait::kLastCall:
      NoteJoinedAddrs(round);
      detail = NameList(LastSeenAddrs());
      if (!detail.empty()) detail = absl::StrCat("joined: ", detail);
      break;
    case RdzvWait::kExitBarrier: {
      const RdzvState current = d_.monitor->current();
      if (current.round == round) detail = d_.exit->Unfinished(current);
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

void WaitReport::NoteJoinedAddrs(int64_t round) {
  auto listing = d_.store->List(d_.keys->JoinPrefix(round));
  if (!listing.ok()) return;
  absl::MutexLock lock(&mu_);
  last_seen_.clear();
  for (const auto& e : listing->entries) {
    auto p = DecodeJoin(e.value);
    if (p.ok() && std::find(last_seen_.begin(), last_seen_.end(), p->addr) ==
                      last_seen_.end()) {
      last_seen_.push_back(p->addr);
    }
  }
}

std::vector<std::string> WaitReport::LastSeenAddrs() const {
  absl::MutexLock lock(&mu_);
  return last_seen_;
}

}  // namespace distjob
