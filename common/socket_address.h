// A TCP socket address from an IP literal, for the agent's own connects and
// listeners: one parser, so every caller accepts the same text ("[::1]"
// included) and none resolves a name (that goes through common/resolver.h).
#ifndef DISTJOB_COMMON_SOCKET_ADDRESS_H_
#define DISTJOB_COMMON_SOCKET_ADDRESS_H_

#include <sys/socket.h>

#include <optional>

#include "absl/strings/string_view.h"

namespace distjob {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  const sockaddr* get() const {
    return reinterpret_cast<const sockaddr*>(&storage);
  }
};

// `host` an IPv4 or IPv6 literal (an IPv6 one may be bracketed, as in
// URLs) with `port` (0..65535); nullopt when `host` is no IP literal or the
// port is out of range.
std::optional<SocketAddress> ParseSocketAddress(absl::string_view host,
                                                int port);

}  // namespace distjob

#endif  // DISTJOB_COMMON_SOCKET_ADDRESS_H_
