// At most one log line a second per kind of event, with a count of the
// ones held back, so that a peer that sends garbage (or reconnects) in a
// loop costs the log one line a second instead of one per event: a
// random-frame flood once wrote 115,857 lines in 8 s. Pure bookkeeping on
// times the caller passes in; not thread-safe (one event loop's).
#ifndef DISTJOB_COMMON_LOG_RATE_LIMITER_H_
#define DISTJOB_COMMON_LOG_RATE_LIMITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {

class LogRateLimiter {
 public:
  explicit LogRateLimiter(absl::Duration interval = absl::Seconds(1))
      : interval_(interval) {}

  // Whether a line of `kind` may be logged at `now`: the first one, and the
  // first one an interval after the last logged. When it may, *held_back
  // is how many of that kind were not logged since the last one (to be
  // told on the line); otherwise the event is counted as held back.
  bool Allow(absl::string_view kind, absl::Time now, int64_t* held_back);

  // The kinds with lines held back whose last logged line is an interval
  // old or more, with their counts, reset: a flood that stopped still has
  // its tail told once. Sorted by kind.
  std::vector<std::pair<std::string, int64_t>> Overdue(absl::Time now);

  // `text` with each run of digits as one '#': the kind of a message
  // whose numbers vary ("unknown query type 254" and "... 7" are one).
  static std::string Shape(absl::string_view text);

  // " (and N more like it not logged)", or "" for 0.
  static std::string HeldBackSuffix(int64_t held_back);

 private:
  struct Kind {
    absl::Time last_logged = absl::InfinitePast();
    int64_t held_back = 0;
  };
  const absl::Duration interval_;
  absl::flat_hash_map<std::string, Kind> kinds_;
};

// Warning lines through a LogRateLimiter of a second, on the real clock:
// "<prefix>: <line> (and N more like it not logged)".
class RateLimitedWarnings {
 public:
  explicit RateLimitedWarnings(std::string prefix)
      : prefix_(std::move(prefix)) {}
  // `line` unless a line of `kind` was logged within the last second.
  void Warn(absl::string_view kind, const std::string& line);
  // One line per kind whose held-back lines are a second old: call it at
  // least once a second.
  void TellOverdue();

 private:
  const std::string prefix_;
  LogRateLimiter limiter_;
};

}  // namespace distjob

#endif  // DISTJOB_COMMON_LOG_RATE_LIMITER_H_
