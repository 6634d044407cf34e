#include "common/backoff.h"

#include <algorithm>
#include <atomic>

#include "absl/time/clock.h"

namespace distjob {
namespace {

// Distinct seeds for backoffs made in the same instant in one process, and
// across processes by the clock: enough to spread retries, which is all
// jitter is for (no random device is needed).
uint64_t Seed() {
  static std::atomic<uint64_t> counter{0};
  return static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^
         (++counter * 0x9E3779B97F4A7C15ULL);
}

}  // namespace

Backoff::Backoff(absl::Duration initial, absl::Duration max, double jitter)
    : initial_(std::max(initial, absl::Milliseconds(1))),
      max_(std::max(max, initial_)),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      step_(initial_),
      state_(Seed() | 1) {}

absl::Duration Backoff::Next() {
  // xorshift64: a uniform draw in [0, 1).
  state_ ^= state_ << 13;
  state_ ^= state_ >> 7;
  state_ ^= state_ << 17;
  const double u = static_cast<double>(state_ >> 11) / 9007199254740992.0;
  const absl::Duration pause = step_ * (1.0 - jitter_ * u);
  step_ = std::min(step_ * 2, max_);
  ++attempts_;
  return pause;
}

void Backoff::Reset() {
  step_ = initial_;
  attempts_ = 0;
}

}  // namespace distjob
