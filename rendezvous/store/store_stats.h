// What the host of the rendezvous store reports about it at scrape time
// (the agent's /metrics): a plain snapshot, so that the store stays free
// of the agent's metrics code.
#ifndef DISTJOB_RENDEZVOUS_STORE_STORE_STATS_H_
#define DISTJOB_RENDEZVOUS_STORE_STORE_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace distjob {

struct StoreRequestCount {
  std::string method;  // the gRPC method: Set, Get, Watch, ...
  std::string code;    // the canonical status code: OK, DEADLINE_EXCEEDED
  int64_t count = 0;
};

struct StoreStats {
  int64_t keys = 0;
  // Keys, values, tombstones and parked waits with their overhead, as
  // StoreLimits counts them.
  int64_t bytes = 0;
  int64_t parked_waits = 0;  // blocked gets and watches
  int64_t lease_expiries = 0;
  // Connections (rendezvous/store/server/conn_limiter.h): open now; closed at
  // once at a cap; closed to make room for another address; closed for
  // speaking TLS to a plaintext store or the reverse.
  int64_t connections = 0;
  int64_t connections_refused = 0;
  int64_t connections_evicted = 0;
  int64_t connections_mismatched = 0;
  // gRPC requests answered, by method and code (only those seen).
  std::vector<StoreRequestCount> requests;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_STORE_STATS_H_
