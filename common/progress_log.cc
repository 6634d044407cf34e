#include "common/progress_log.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"

namespace distjob {

absl::Duration ProgressInterval() {
  // Read once: the hook is for a whole test process, not per wait.
  static const absl::Duration interval = [] {
    const char* hook = std::getenv("DISTJOB_TEST_PROGRESS_INTERVAL_MS");
    int64_t ms = 0;
    if (hook != nullptr && absl::SimpleAtoi(hook, &ms) && ms > 0) {
      return absl::Milliseconds(ms);
    }
    return absl::Seconds(15);
  }();
  return interval;
}

ProgressLog::ProgressLog(absl::Duration interval,
                         std::function<absl::Time()> clock)
    : interval_(interval),
      clock_(std::move(clock)),
      start_(clock_()),
      next_(start_ + interval_) {}

bool ProgressLog::Due() {
  const absl::Time now = clock_();
  if (now < next_) return false;
  // From now, not from the missed mark: a wait that was blocked for
  // several intervals logs once, then one interval later.
  next_ = now + interval_;
  return true;
}

absl::Duration ProgressLog::Elapsed() const { return clock_() - start_; }

}  // namespace distjob
