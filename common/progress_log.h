// The pace of a long wait's progress lines: a wait asks Due() on each of
// its iterations, however often it wakes, and logs only when it says so,
// so a wait that lasts minutes says what it waits for every interval
// (docs/rendezvous.md, "No silent wait") without a line per retry.
#ifndef DISTJOB_COMMON_PROGRESS_LOG_H_
#define DISTJOB_COMMON_PROGRESS_LOG_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace distjob {

// The interval between two progress lines: 15 s, inside the 10-30 s that
// an operator watching a pod expects; DISTJOB_TEST_PROGRESS_INTERVAL_MS
// (a test hook, documented in docs/rendezvous.md) shortens it, so black-box
// tests do not wait 15 s for a line.
absl::Duration ProgressInterval();

class ProgressLog {
 public:
  // Counts from now on `clock`; the first line is due one interval later.
  explicit ProgressLog(
      absl::Duration interval = ProgressInterval(),
      std::function<absl::Time()> clock = [] { return absl::Now(); });

  // True at most once per interval: when one has passed since the start or
  // since the last time it returned true.
  bool Due();
  // How long the wait has lasted, for the line.
  absl::Duration Elapsed() const;

 private:
  absl::Duration interval_;
  std::function<absl::Time()> clock_;
  absl::Time start_;
  absl::Time next_;
};

}  // namespace distjob

#endif  // DISTJOB_COMMON_PROGRESS_LOG_H_
