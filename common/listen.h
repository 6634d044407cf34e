// The one way our servers open a listening TCP socket: the rendezvous
// store's connection limiter, the workers' TCPStore server and the
// metrics/health HTTP server.
#ifndef DISTJOB_COMMON_LISTEN_H_
#define DISTJOB_COMMON_LISTEN_H_

#include <string>

#include "absl/status/statusor.h"

namespace distjob {

// A non-blocking, close-on-exec socket listening on `host`, a numeric IPv4
// or IPv6 address (brackets allowed: "[::1]"), and `port` (0: a free one),
// with room for `backlog` connections not accepted yet. "::" also takes
// IPv4, and on a host without IPv6 is "0.0.0.0". SO_REUSEADDR: a restarted
// server binds over its predecessor's connections in TIME_WAIT.
// InvalidArgument for a host that is not numeric or a port out of range;
// otherwise Unavailable: "cannot listen on HOST:P: <reason>" ("on port P"
// for every address).
absl::StatusOr<int> ListenTcp(const std::string& host, int port, int backlog);

// The port `fd` is bound to; 0 when it cannot say.
int BoundPort(int fd);

}  // namespace distjob

#endif  // DISTJOB_COMMON_LISTEN_H_
