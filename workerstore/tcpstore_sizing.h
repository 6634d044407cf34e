// The workers' TCPStore server's caps for the job that will use it. The
// defaults (tcpstore_server.h, tcpstore_limits.h) hold 16,384 connections
// in a 1 GiB container; a job declared larger (agent/fd_needs.h: two
// connections a rank, for 1.13's clients) must be admitted without flags,
// so each cap that a connection multiplies grows by what each connection
// past the default brings. The caps still bound every client and all of
// them together: they follow the operator's declared size, which no client
// can change.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_SIZING_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_SIZING_H_

#include <cstddef>

#include "workerstore/tcpstore_limits.h"
#include "workerstore/tcpstore_server.h"

namespace distjob {

// What one connection past the default count adds to the caps: its
// bookkeeping and a small answer buffer to max_buffered_bytes (an idle
// connection holds ~0.85 KiB: docs/bench/results.md), one parked wait
// (a rank waits for one thing at a time) and that wait's bytes with a key
// of up to 256 bytes to the waits' caps.
inline constexpr size_t kBufferedBytesPerConnection = 2048;
inline constexpr size_t kWaiterBytesPerConnection =
    kTcpStoreWaitBytes + 2 * 256;

// The default options with every per-connection cap grown to hold
// `connections` clients; the defaults when that is no more than
// TcpStoreServerOptions::max_connections.
TcpStoreServerOptions TcpStoreOptionsFor(size_t connections);

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_SIZING_H_
