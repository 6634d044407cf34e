#include "workerstore/tcpstore_sizing.h"

namespace distjob {

TcpStoreServerOptions TcpStoreOptionsFor(size_t connections) {
  TcpStoreServerOptions o;
  if (connections <= o.max_connections) return o;
  const size_t extra = connections - o.max_connections;
  o.max_connections = connections;
  o.max_buffered_bytes += extra * kBufferedBytesPerConnection;
  o.limits.max_waiters += extra;
  o.limits.max_waiter_bytes += extra * kWaiterBytesPerConnection;
  return o;
}

}  // namespace distjob
