#include "common/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace distjob {

std::optional<SocketAddress> ParseSocketAddress(absl::string_view host,
                                                int port) {
  if (port < 0 || port > 65535) return std::nullopt;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // inet_pton reads up to a NUL: an embedded one must not cut the text.
  if (host.find('\0') != absl::string_view::npos) return std::nullopt;
  const std::string text(host);
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(*v4);
  } else if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(*v6);
  } else {
    return std::nullopt;
  }
  return a;
}

}  // namespace distjob
