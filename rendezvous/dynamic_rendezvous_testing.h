// What the DynamicRendezvous tests share: a node's options with the short
// intervals that keep the tests fast.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_TESTING_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_TESTING_H_

#include <string>

#include "absl/time/time.h"
#include "rendezvous/dynamic_rendezvous.h"

namespace distjob {

// Node `i` ("n<i>") of job "job" with `min`..`max` nodes; keep-alives every
// 100 ms (3 missed: gone), last call 300 ms, join timeout 20 s.
inline DynamicRendezvousOptions Options(int i, int min, int max) {
  DynamicRendezvousOptions o;
  o.run_id = "job";
  o.min_nodes = min;
  o.max_nodes = max;
  o.node = "n" + std::to_string(i);
  o.addr = "127.0.0.1";
  o.config.keep_alive_interval = absl::Milliseconds(100);
  o.config.keep_alive_max_attempt = 3;
  o.config.last_call_timeout = absl::Milliseconds(300);
  o.config.join_timeout = absl::Seconds(20);
  return o;
}

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_TESTING_H_
