#include "workerstore/tcpstore_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
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

absl::StatusOr<int> ListenTcp(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcpstore: port ", port, " is not in 0..65535"));
  }
  std::optional<SocketAddress> at = ParseSocketAddress(host, port);
  if (!at.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcpstore: listen address '", host,
                     "' is not a numeric IPv4 or IPv6 address"));
  }
  int fd = socket(at->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && at->family() == AF_INET6 && host == "::") {
    // A host without IPv6: every IPv4 address instead.
    at = ParseSocketAddress("0.0.0.0", port);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("tcpstore: socket: ", std::strerror(errno)));
  }
  const int yes = 1, no = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  if (at->family() == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
  }
  if (bind(fd, at->get(), at->length) != 0 || listen(fd, 4096) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("tcpstore: cannot listen on ",
                                               host, ":", port, ": ",
                                               std::strerror(err)));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return PortOf(bound);
}

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
