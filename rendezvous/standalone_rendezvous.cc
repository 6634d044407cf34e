#include "rendezvous/standalone_rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace distjob {

StandaloneRendezvous::StandaloneRendezvous(std::string master_addr,
                                           std::string run_id)
    : master_addr_(master_addr.empty() ? "127.0.0.1" : std::move(master_addr)),
      run_id_(run_id.empty() ? RandomRunId() : std::move(run_id)) {}

absl::StatusOr<RendezvousResult> StandaloneRendezvous::Next(
    int local_world_size) {
  auto port = FindFreePort(master_addr_);
  if (!port.ok()) return port.status();
  RendezvousResult r;
  r.round = round_++;
  r.group_rank = 0;
  r.group_world_size = 1;
  r.base_rank = 0;
  r.world_size = local_world_size;
  r.master_addr = master_addr_;
  r.master_port = *port;
  r.run_id = run_id_;
  return r;
}

absl::StatusOr<int> FindFreePort(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* info = nullptr;
  const int rc = getaddrinfo(address.c_str(), "0", &hints, &info);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve local address '", address, "': ", gai_strerror(rc)));
  }
  absl::Cleanup free_info = [info] { freeaddrinfo(info); };
  int last_errno = 0;
  for (addrinfo* ai = info; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    absl::Cleanup close_fd = [fd] { close(fd); };
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last_errno = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      last_errno = errno;
      continue;
    }
    if (bound.ss_family == AF_INET6) {
      return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
    }
    return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  return ErrnoError(last_errno,
                    absl::StrCat("binding a free port on '", address, "'"));
}

std::string RandomRunId() {
  unsigned char bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

}  // namespace distjob
