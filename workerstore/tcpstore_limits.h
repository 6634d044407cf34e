// What the workers' TCPStore server may hold: its own limits, apart from
// the rendezvous store's (rendezvous/store/store_core.h, StoreLimits), so
// that neither store's package reaches the other's. The defaults and the
// per-entry costs are the values the server took from StoreLimits and
// StoreCore until issue 38 gave it these: its limits are unchanged.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_LIMITS_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_LIMITS_H_

#include <cstddef>

namespace distjob {

struct TcpStoreLimits {
  // One key, and one value (an append's result included); with
  // max_keys_per_request, passed to the frame parser
  // (tcpstore_protocol.h, ParseLimits).
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  // Keys of one request.
  size_t max_keys_per_request = 4096;
  // The keys and values the store holds (queue items included), each with
  // kTcpStoreKeyBytes.
  size_t max_total_bytes = size_t{256} << 20;
  // Parked waits: their memory (each kTcpStoreWaitBytes and twice its
  // keys' bytes: TcpStoreWaits::Bytes) and their number, in all; an
  // address holds at most a quarter of each (peer_budgets.h).
  size_t max_waiter_bytes = size_t{64} << 20;
  size_t max_waiters = 100000;
  // Parked waits of one connection (not of one address: a TCPStore client
  // waits for one thing at a time).
  size_t max_waiters_per_peer = 8192;
};

// What a key costs beyond its bytes and its value's, counted against
// max_total_bytes: an estimate of its map entry and heap blocks, the
// rendezvous store's StoreCore::kKeyOverhead on a 64-bit host.
inline constexpr size_t kTcpStoreKeyBytes = 240;
// What a parked wait costs beyond its keys, counted against
// max_waiter_bytes (StoreCore::kWaiterOverhead).
inline constexpr size_t kTcpStoreWaitBytes = 640;

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_LIMITS_H_
