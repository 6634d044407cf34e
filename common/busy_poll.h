// When an event loop polls for its next work instead of sleeping: on a
// machine where waking a sleeping thread costs tens of µs (a virtual CPU
// woken from idle), a server that answers in fewer pays that wake-up on
// every request of a client that sends them back to back. The loop polls
// for `window` after its last work, and only while the wait before that
// work was shorter than `window`: traffic whose gaps a poll would not
// bridge costs no spinning but once per such gap, and a busy loop, whose
// polls always find work, never spins at all. Not thread-safe: one loop's.
#ifndef DISTJOB_COMMON_BUSY_POLL_H_
#define DISTJOB_COMMON_BUSY_POLL_H_

#include <chrono>

#include "absl/time/time.h"

namespace distjob {

class BusyPoll {
 public:
  using Clock = std::chrono::steady_clock;

  explicit BusyPoll(absl::Duration window)
      : window_(absl::ToChronoNanoseconds(window)), idle_since_(Clock::now()) {}

  // Whether the loop should poll (not sleep) for its next work now.
  bool ShouldPoll() const {
    return pays_ && Clock::now() - idle_since_ < window_;
  }
  // Work arrived, after a wait that began at the last Idle().
  void GotWork() { pays_ = Clock::now() - idle_since_ < window_; }
  // The loop finished its work: its wait for the next begins.
  void Idle() { idle_since_ = Clock::now(); }

 private:
  const Clock::duration window_;
  Clock::time_point idle_since_;
  bool pays_ = false;
};

}  // namespace distjob

#endif  // DISTJOB_COMMON_BUSY_POLL_H_
