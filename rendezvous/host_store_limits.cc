#include "rendezvous/host_store_limits.h"

#include <algorithm>

namespace distjob {

StoreLimits HostStoreLimits(int max_nodes) {
  StoreLimits limits;
  const size_t waits =
      kWaitsPerNode * static_cast<size_t>(std::max(max_nodes, 0));
  limits.max_waiters = std::max(limits.max_waiters, waits);
  limits.max_waiter_bytes =
      std::max(limits.max_waiter_bytes, waits * kBytesPerWait);
  const size_t nodes = static_cast<size_t>(std::max(max_nodes, 0));
  limits.completion_queues = std::clamp<size_t>(
      (nodes + kNodesPerQueue - 1) / kNodesPerQueue, 1, kMaxQueues);
  return limits;
}

}  // namespace distjob
