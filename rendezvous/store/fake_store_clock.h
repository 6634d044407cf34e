// A StoreClock that moves only when a test advances it.
#ifndef DISTJOB_RENDEZVOUS_STORE_FAKE_STORE_CLOCK_H_
#define DISTJOB_RENDEZVOUS_STORE_FAKE_STORE_CLOCK_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/store/store_clock.h"

namespace distjob {

class FakeStoreClock : public StoreClock {
 public:
  TimePoint Now() override;
  void Advance(absl::Duration d);
  // Waits (at most `timeout`, real time) until another thread reads the
  // clock. StoreCore's timer reads it once a tick, under the core's lock,
  // and then expires what is due: in a test whose other threads make no
  // calls, once this returns every lease and deadline due at the time set
  // before the call is expired for the test's next call into the core
  // (callbacks the expiry answers may still be running).
  bool AwaitNextRead(absl::Duration timeout);

 private:
  absl::Mutex mu_;
  // Starts well past the epoch so that deadlines never underflow.
  TimePoint now_ ABSL_GUARDED_BY(mu_) = TimePoint(std::chrono::hours(1));
  uint64_t reads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_FAKE_STORE_CLOCK_H_
