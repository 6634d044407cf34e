#include "rendezvous/store/fake_store_clock.h"

namespace distjob {

StoreClock::TimePoint FakeStoreClock::Now() {
  absl::MutexLock lock(&mu_);
  ++reads_;
  return now_;
}

void FakeStoreClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += absl::ToChronoNanoseconds(d);
}

bool FakeStoreClock::AwaitNextRead(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const uint64_t before = reads_;
  auto read = [this, before]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return reads_ > before;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&read), timeout);
}

}  // namespace distjob
