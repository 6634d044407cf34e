// The pause between attempts of a retry loop: exponential, capped, with
// jitter so that nodes failing together do not retry in lock step. Every
// retry loop in the agent waits on one of these, and logs its failure once
// per pause, so a failing store or peer costs neither a core nor the log.
#ifndef DISTJOB_COMMON_BACKOFF_H_
#define DISTJOB_COMMON_BACKOFF_H_

#include <cstdint>

#include "absl/time/time.h"

namespace distjob {

class Backoff {
 public:
  // Pauses start at `initial` and double up to `max`; each is drawn from
  // [step × (1 - jitter), step] (jitter in [0, 1]).
  Backoff(absl::Duration initial, absl::Duration max, double jitter = 0.25);

  // The next pause; counts an attempt.
  absl::Duration Next();
  // After a success: the next failure starts from `initial` again.
  void Reset();
  // Pauses handed out since the last Reset.
  int attempts() const { return attempts_; }

 private:
  absl::Duration initial_;
  absl::Duration max_;
  double jitter_;
  absl::Duration step_;
  int attempts_ = 0;
  uint64_t state_;
};

}  // namespace distjob

#endif  // DISTJOB_COMMON_BACKOFF_H_
