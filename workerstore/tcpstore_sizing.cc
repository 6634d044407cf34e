#include "workerstore/tcpstore_sizing.h"

namespace distjob {

void GrowForConnections(size_t extra, size_t* max_buffered_bytes,
                        TcpStoreLimits* limits) {
  *max_buffered_bytes += extra * kBufferedBytesPerConnection;
  limits->max_waiters += extra * kWaitersPerConnection;
  limits->max_waiter_bytes += extra * kWaiterBytesPerConnection;
}

}  // namespace distjob
