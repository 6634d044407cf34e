#include "supervisor/timer_table.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace distjob {

TimerTable::Outcome TimerTable::Apply(const TimerRequest& request) {
  Key key{request.pid, request.scope_id};
  auto it = timers_.find(key);
  if (request.release) {
    if (it == timers_.end()) return Outcome::kNotHeld;
    Erase(it);
    return Outcome::kReleased;
  }
  if (it != timers_.end()) {
    // Re-armed: only its place in the expiry order moves.
    by_expiry_.erase(std::make_pair(it->second.expiration, key));
    it->second = Timer{request.expiration, request.signal};
    by_expiry_.insert({request.expiration, std::move(key)});
    return Outcome::kSet;
  }
  size_t& held = per_pid_[request.pid];
  if (held >= limits_.per_pid) return Outcome::kPidFull;
  if (timers_.size() >= limits_.total) {
    if (held == 0) per_pid_.erase(request.pid);
    return Outcome::kTableFull;
  }
  ++held;
  timers_.emplace(key, Timer{request.expiration, request.signal});
  by_expiry_.insert({request.expiration, std::move(key)});
  return Outcome::kSet;
}

absl::Time TimerTable::NextExpiry() const {
  return by_expiry_.empty() ? absl::InfiniteFuture()
                            : by_expiry_.begin()->first;
}

std::vector<ExpiredTimer> TimerTable::TakeExpired(absl::Time now) {
  std::vector<ExpiredTimer> expired;
  // In expiry order, so each pid's first entry is its earliest timer and
  // the first with a signal is the one torch would send.
  for (auto it = by_expiry_.begin(); it != by_expiry_.end() && it->first <= now;
       ++it) {
    const pid_t pid = it->second.first;
    auto seen =
        std::find_if(expired.begin(), expired.end(),
                     [pid](const ExpiredTimer& e) { return e.pid == pid; });
    const int signal = timers_.at(it->second).signal;
    if (seen == expired.end()) {
      expired.push_back(
          ExpiredTimer{pid, it->second.second, it->first, std::max(signal, 0)});
    } else if (seen->signal == 0 && signal > 0) {
      seen->scope_id = it->second.second;
      seen->expiration = it->first;
      seen->signal = signal;
    }
  }
  for (const ExpiredTimer& e : expired) DropPid(e.pid);
  return expired;
}

size_t TimerTable::DropPid(pid_t pid) {
  auto it = timers_.lower_bound(Key{pid, std::string()});
  size_t dropped = 0;
  while (it != timers_.end() && it->first.first == pid) {
    auto next = std::next(it);
    Erase(it);
    it = next;
    ++dropped;
  }
  return dropped;
}

void TimerTable::Clear() {
  timers_.clear();
  by_expiry_.clear();
  per_pid_.clear();
}

void TimerTable::Erase(std::map<Key, Timer>::iterator it) {
  by_expiry_.erase(std::make_pair(it->second.expiration, it->first));
  auto held = per_pid_.find(it->first.first);
  if (held != per_pid_.end() && --held->second == 0) per_pid_.erase(held);
  timers_.erase(it);
}

}  // namespace distjob
