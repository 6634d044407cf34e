// The limits of the store an agent hosts for its job (c10d backend), and
// of the store the scale benchmark runs in its place (bench/store_bench.cc).
#ifndef DISTJOB_RENDEZVOUS_HOST_STORE_LIMITS_H_
#define DISTJOB_RENDEZVOUS_HOST_STORE_LIMITS_H_

#include <cstddef>

#include "rendezvous/store/store_core.h"

namespace distjob {

// Parked waits a node may hold at once: its monitor's watch, and a watch
// or get of its round or exit barrier.
inline constexpr size_t kWaitsPerNode = 2;
// The keys of one parked wait of the rendezvous: a member's watch names up
// to three (its round's state, the waiting nodes' prefix, the next
// member's lease), and a member's read after the close two (its rank
// record and the master's record), each under the job's prefix; 512 bytes
// hold run ids and node names of ~100 characters each.
inline constexpr size_t kKeyBytesPerWait = 512;
// What one parked wait of the rendezvous costs the store, as
// StoreCore::WaiterBytes counts it: its overhead, the gRPC call the server
// counts with it, and its keys twice (the wait and its index entry).
inline constexpr size_t kBytesPerWait = StoreCore::kWaiterOverhead +
                                        StoreCore::kServerCallBytes +
                                        2 * kKeyBytesPerWait;

// Nodes per completion queue of the store's gRPC server, and the most
// queues (StoreLimits::completion_queues): a job of up to kNodesPerQueue
// nodes keeps one queue and so no thread hand-off per call; a larger one
// gets a queue per kNodesPerQueue nodes, up to kMaxQueues. More queues
// shorten each queue's list of calls in flight but hand more events from
// the thread that read them to another: on the 2-core benchmark machine
// 16 queues closed no 16,384-node round in 120 s where 4 closed it a
// little faster than 1 (docs/bench/results.md).
inline constexpr size_t kNodesPerQueue = 2048;
inline constexpr size_t kMaxQueues = 4;

// StoreLimits' defaults, with the parked waits' budget grown to
// kWaitsPerNode waits per node of a job of up to `max_nodes`: the default
// (64 MiB, about 7,700 waits) would refuse the waits of a round of more
// than ~3,800 nodes, and each refused wait would be retried at once; and
// with kNodesPerQueue nodes per completion queue of the server.
StoreLimits HostStoreLimits(int max_nodes);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_HOST_STORE_LIMITS_H_
