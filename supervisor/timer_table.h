// The FileTimer's timers, keyed by (pid, scope) as torch keys them, in
// order of expiry. Bounded: a worker that sets timers in a loop with new
// scopes (or many pids that never release) cannot grow the agent without
// limit. Pure bookkeeping on times the caller passes; one thread's.
#ifndef DISTJOB_SUPERVISOR_TIMER_TABLE_H_
#define DISTJOB_SUPERVISOR_TIMER_TABLE_H_

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "supervisor/timer_request.h"

namespace distjob {

struct TimerLimits {
  size_t per_pid = 4096;  // a step nests a few scopes, not thousands
  size_t total = 65536;   // ~100 bytes each: a few MB at most
};

// What a worker's expired timer asks for: torch's rule, the earliest expired
// timer of that pid with a signal > 0 (signal 0 when none has one).
struct ExpiredTimer {
  pid_t pid = 0;
  std::string scope_id;
  absl::Time expiration;
  int signal = 0;
};

class TimerTable {
 public:
  enum class Outcome {
    kSet,        // set or moved
    kReleased,   // a release of a timer held
    kNotHeld,    // a release of a timer not held (already expired)
    kPidFull,    // refused: that pid holds per_pid timers
    kTableFull,  // refused: the table holds total timers
  };

  explicit TimerTable(TimerLimits limits = {}) : limits_(limits) {}

  Outcome Apply(const TimerRequest& request);

  // When the earliest timer expires; InfiniteFuture when none is held.
  absl::Time NextExpiry() const;

  // One entry per pid with a timer expired at `now`, earliest first; every
  // timer of those pids is dropped (torch clears a reaped worker's timers).
  std::vector<ExpiredTimer> TakeExpired(absl::Time now);

  // Drops every timer of `pid` (it exited); returns how many.
  size_t DropPid(pid_t pid);
  void Clear();

  size_t size() const { return timers_.size(); }

 private:
  using Key = std::pair<pid_t, std::string>;
  struct Timer {
    absl::Time expiration;
    int signal;
  };
  void Erase(std::map<Key, Timer>::iterator it);

  TimerLimits limits_;
  std::map<Key, Timer> timers_;
  std::set<std::pair<absl::Time, Key>> by_expiry_;
  absl::flat_hash_map<pid_t, size_t> per_pid_;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_TIMER_TABLE_H_
