// The clock that the rendezvous store's leases and wait deadlines run on:
// monotonic, of the store's own process, so that no two nodes' clocks are
// ever compared. Injectable so that tests move time by hand.
#ifndef DISTJOB_RENDEZVOUS_STORE_STORE_CLOCK_H_
#define DISTJOB_RENDEZVOUS_STORE_STORE_CLOCK_H_

#include <chrono>

namespace distjob {

class StoreClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~StoreClock() = default;
  // Never goes back; safe to call from any thread.
  virtual TimePoint Now() = 0;
};

// std::chrono::steady_clock; one for the whole process, never destroyed.
StoreClock* MonotonicStoreClock();

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_STORE_CLOCK_H_
