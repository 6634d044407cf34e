#include "rendezvous/store/store_clock.h"

namespace distjob {
namespace {

class Monotonic : public StoreClock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }
};

}  // namespace

StoreClock* MonotonicStoreClock() {
  static auto* clock = new Monotonic();
  return clock;
}

}  // namespace distjob
