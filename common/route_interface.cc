#include "common/route_interface.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/socket_address.h"

namespace distjob {
namespace {

// Whether the interface address `a` is the source address `local`.
bool SameAddress(const sockaddr* a, const sockaddr_storage& local) {
  if (a == nullptr || a->sa_family != local.ss_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&local)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(
               &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
               &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr,
               sizeof(in6_addr)) == 0;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::string> RouteInterface(const std::string& address) {
  // Any port: a UDP connect only picks the route and the source address.
  const std::optional<SocketAddress> to = ParseSocketAddress(address, 9);
  if (!to.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(address, " is not an IP address"));
  }
  const int fd = socket(to->family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError(errno, "socket for a route look-up");
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  const bool routed =
      connect(fd, to->get(), to->length) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  const int error = errno;
  close(fd);
  if (!routed) {
    return absl::NotFoundError(
        absl::StrCat("no route to ", address, ": ", std::strerror(error)));
  }
  ifaddrs* addrs = nullptr;
  if (getifaddrs(&addrs) != 0) return ErrnoError(errno, "getifaddrs");
  std::string name;
  for (ifaddrs* a = addrs; a != nullptr && name.empty(); a = a->ifa_next) {
    if (SameAddress(a->ifa_addr, local)) name = a->ifa_name;
  }
  freeifaddrs(addrs);
  if (name.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no interface holds the source address toward ", address));
  }
  return name;
}

}  // namespace distjob
