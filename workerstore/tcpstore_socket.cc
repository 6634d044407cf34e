#include "workerstore/tcpstore_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/str_cat.h"
#include "common/socket_address.h"

namespace distjob {
namespace {

uint16_t PortOf(const sockaddr_storage& ss) {
  return ntohs(ss.ss_family == AF_INET6
                   ? reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port
                   : reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

std::string NormalizeAddress(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], buf, sizeof(buf));
    } else {
      inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    }
  }
  return buf;
}

std::string NormalizeText(const std::string& ip) {
  const std::optional<SocketAddress> at = ParseSocketAddress(ip, 0);
  return at.has_value() ? NormalizeAddress(at->storage) : "";
}

std::string PeerName(const sockaddr_storage& ss, const std::string& ip) {
  return ip.find(':') != std::string::npos
             ? absl::StrCat("[", ip, "]:", PortOf(ss))
             : absl::StrCat(ip, ":", PortOf(ss));
}

}  // namespace distjob
