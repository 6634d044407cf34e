#include "workerstore/tcpstore_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace distjob {
namespace {

uint16_t PortOf(const sockaddr_storage& ss) {
  return ntohs(ss.ss_family == AF_INET6
                   ? reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port
                   : reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

absl::StatusOr<int> ListenTcp(const std::string& host, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*a6);
  } else if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*a4);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("tcpstore: listen address '", host,
                     "' is not a numeric IPv4 or IPv6 address"));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tcpstore: port ", port, " is not in 0..65535"));
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && ss.ss_family == AF_INET6 && host == "::") {
    // A host without IPv6: every IPv4 address instead.
    ss = {};
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    a4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*a4);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("tcpstore: socket: ", std::strerror(errno)));
  }
  const int yes = 1, no = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  if (ss.ss_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      listen(fd, 4096) != 0) {
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
  sockaddr_storage ss{};
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, ip.c_str(), &a4->sin_addr) == 1) {
    ss.ss_family = AF_INET;
  } else if (inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr) == 1) {
    ss.ss_family = AF_INET6;
  } else {
    return "";
  }
  return NormalizeAddress(ss);
}

std::string PeerName(const sockaddr_storage& ss, const std::string& ip) {
  return ip.find(':') != std::string::npos
             ? absl::StrCat("[", ip, "]:", PortOf(ss))
             : absl::StrCat(ip, ":", PortOf(ss));
}

}  // namespace distjob
