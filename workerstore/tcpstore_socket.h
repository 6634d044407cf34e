// The TCPStore server's socket plumbing (tcpstore_server.h): client
// addresses in the one numeric form that its admission
// list and per-address budgets (peer_budgets.h) key on.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_SOCKET_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_SOCKET_H_

#include <sys/socket.h>

#include <string>

namespace distjob {

// The numeric form of an address, an IPv4-mapped IPv6 one as IPv4.
std::string NormalizeAddress(const sockaddr_storage& ss);
// `ip` in NormalizeAddress's form, or "" when it is not a numeric address.
std::string NormalizeText(const std::string& ip);
// "ip:port", "[ipv6]:port": a client for the log; `ip` NormalizeAddress's.
std::string PeerName(const sockaddr_storage& ss, const std::string& ip);

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_SOCKET_H_
