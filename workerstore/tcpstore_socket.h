// The TCPStore server's socket plumbing (tcpstore_server.h): its listening
// socket, and client addresses in the one numeric form that its admission
// list and per-address budgets (peer_budgets.h) key on.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_SOCKET_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_SOCKET_H_

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"

namespace distjob {

// A non-blocking listening socket on numeric `host` ("::" listens on IPv4
// too; a host without IPv6 falls back to "0.0.0.0") and `port` (0: any).
// InvalidArgument for a host that is not numeric or a port out of range;
// Unavailable naming host:port when it cannot listen.
absl::StatusOr<int> ListenTcp(const std::string& host, int port);

// The port `fd` listens on.
int BoundPort(int fd);

// The numeric form of an address, an IPv4-mapped IPv6 one as IPv4.
std::string NormalizeAddress(const sockaddr_storage& ss);
// `ip` in NormalizeAddress's form, or "" when it is not a numeric address.
std::string NormalizeText(const std::string& ip);
// "ip:port", "[ipv6]:port": a client for the log; `ip` NormalizeAddress's.
std::string PeerName(const sockaddr_storage& ss, const std::string& ip);

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_SOCKET_H_
