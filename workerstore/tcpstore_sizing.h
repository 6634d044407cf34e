// How the workers' TCPStore server's caps grow with the job that will use
// it. The defaults (tcpstore_server.h, tcpstore_limits.h) hold 16,384
// connections in a 1 GiB container; a job declared larger
// (TcpStoreServerOptions::expected_connections) must be admitted without
// flags, so each cap that a connection multiplies grows by what each
// connection past the default brings. The caps still bound every client
// and all of them together: they follow the operator's declared size,
// which no client can change.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_SIZING_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_SIZING_H_

#include <cstddef>

#include "workerstore/tcpstore_conn.h"
#include "workerstore/tcpstore_limits.h"

namespace distjob {

// What one connection past the default count adds to the caps:
// - to max_buffered_bytes, what an idle connection may hold, its
//   bookkeeping and the answer buffer it keeps (one that has served a
//   barrier holds ~0.85 KiB: docs/bench/results.md);
// - one parked wait, a rank waiting for one thing at a time, with a key of
//   up to 256 bytes (TcpStoreWaits::Bytes). That is a barrier's wait;
//   gloo's waits name up to 512 keys, ~20 KiB, but only while its ranks
//   connect, and an address holds a quarter of the grown caps.
inline constexpr size_t kBufferedBytesPerConnection =
    kConnBytes + kIdleBufferBytes;
inline constexpr size_t kWaitersPerConnection = 1;
inline constexpr size_t kWaiterBytesPerConnection =
    kTcpStoreWaitBytes + 2 * 256;

// Grows `*max_buffered_bytes` and `limits`' waits for `extra` connections
// past the default count.
void GrowForConnections(size_t extra, size_t* max_buffered_bytes,
                        TcpStoreLimits* limits);

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_SIZING_H_
