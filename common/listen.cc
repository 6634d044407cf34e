#include "common/listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/socket_address.h"

namespace distjob {
namespace {

bool IsUnspecifiedV6(const SocketAddress& at) {
  return at.family() == AF_INET6 &&
         IN6_IS_ADDR_UNSPECIFIED(
             &reinterpret_cast<const sockaddr_in6*>(at.get())->sin6_addr);
}

// "port P" on every address (what a user chose then is the port),
// "HOST:P" or "[V6]:P" on one.
std::string Where(const SocketAddress& at, const std::string& host, int port) {
  if (host == "0.0.0.0" || IsUnspecifiedV6(at)) {
    return absl::StrCat("port ", port);
  }
  return at.family() == AF_INET6 ? absl::StrCat("[", host, "]:", port)
                                 : absl::StrCat(host, ":", port);
}

// Unavailable whatever the errno: the port is taken or the address not
// this host's, which a caller may retry elsewhere (a free port).
absl::Status Unavailable(const std::string& where, int error) {
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", where, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<int> ListenTcp(const std::string& host_in, int port,
                              int backlog) {
  std::string host = host_in;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on port ", port, ": not in 0..65535"));
  }
  std::optional<SocketAddress> at = ParseSocketAddress(host, port);
  if (!at.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on '", host_in,
                     "': not a numeric IPv4 or IPv6 address"));
  }
  const std::string where = Where(*at, host, port);
  int fd = socket(at->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && errno == EAFNOSUPPORT && IsUnspecifiedV6(*at)) {
    // A host without IPv6: every IPv4 address instead.
    at = ParseSocketAddress("0.0.0.0", port);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) return Unavailable(where, errno);
  const int yes = 1, no = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  if (IsUnspecifiedV6(*at)) {
    // The system default (net.ipv6.bindv6only) may be on: "::" is meant
    // to take IPv4 too.
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
  }
  if (bind(fd, at->get(), at->length) != 0 || listen(fd, backlog) != 0) {
    const int error = errno;
    close(fd);
    return Unavailable(where, error);
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return 0;
  }
  return ntohs(bound.ss_family == AF_INET6
                   ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                   : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
}

}  // namespace distjob
