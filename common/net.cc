#include "common/net.h"

#include <ares.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "common/errno_status.h"

namespace distjob {

bool IsIpLiteral(absl::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // inet_pton needs a NUL-terminated string.
  const std::string h(host);
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

std::string LocalHostname() {
  char name[256] = {};
  // The last byte stays NUL: gethostname need not terminate a cut name.
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

namespace {

struct CanonicalQuery {
  bool done = false;
  std::string name;
};

void OnCanonicalName(void* arg, int status, int /*timeouts*/,
                     ares_addrinfo* result) {
  auto* query = static_cast<CanonicalQuery*>(arg);
  query->done = true;
  if (result == nullptr) return;
  if (status == ARES_SUCCESS) {
    // The last CNAME target is the canonical name; /etc/hosts reports the
    // first name of the matching line the same way.
    for (ares_addrinfo_cname* c = result->cnames; c != nullptr; c = c->next) {
      if (c->name != nullptr) query->name = c->name;
    }
    if (query->name.empty() && result->name != nullptr) {
      query->name = result->name;
    }
  }
  ares_freeaddrinfo(result);
}

std::string ReadRaw(const std::string& path) {
  // open/read rather than iostreams: this binary has a size limit.
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  ssize_t n;
  while (text.size() < (1 << 20) && (n = read(fd, buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// getfqdn's choice from a hosts-file line naming `host`: the first of its
// names (canonical, then aliases) with a dot, else `host`; "" when no line
// names it (NSS asks DNS only then).
std::string FqdnFromHostsFile(const std::string& host,
                              const std::string& path) {
  for (absl::string_view line : absl::StrSplit(ReadRaw(path), '\n')) {
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.size() < 2) continue;
    const auto names = absl::MakeConstSpan(fields).subspan(1);
    if (std::find(names.begin(), names.end(), host) == names.end()) continue;
    for (absl::string_view name : names) {
      if (absl::StrContains(name, '.')) return std::string(name);
    }
    return host;
  }
  return "";
}

}  // namespace

std::string Fqdn(const std::string& host, absl::Duration timeout,
                 const std::string& hosts_file) {
  if (host.empty() || IsIpLiteral(host)) return host;
  if (std::string name = FqdnFromHostsFile(host, hosts_file); !name.empty()) {
    return name;
  }
  static const int init = ares_library_init(ARES_LIB_INIT_ALL);
  if (init != ARES_SUCCESS) return host;
  ares_options opts{};
  opts.timeout = static_cast<int>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout) / 2));
  opts.tries = 2;
  // The hosts file was read above; c-ares asks DNS (with resolv.conf's
  // search domains) for the canonical name.
  opts.lookups = const_cast<char*>("b");
  ares_channel channel = nullptr;
  if (ares_init_options(&channel, &opts,
                        ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
                            ARES_OPT_LOOKUPS) != ARES_SUCCESS) {
    return host;
  }
  CanonicalQuery query;
  ares_addrinfo_hints hints{};
  hints.ai_flags = ARES_AI_CANONNAME;
  hints.ai_family = AF_UNSPEC;
  ares_getaddrinfo(channel, host.c_str(), nullptr, &hints, OnCanonicalName,
                   &query);
  const absl::Time deadline = absl::Now() + timeout;
  while (!query.done && absl::Now() < deadline) {
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
    std::vector<pollfd> fds;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      short events = 0;
      if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
      if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
      if (events != 0) fds.push_back({socks[i], events, 0});
    }
    if (fds.empty()) break;
    const int left_ms = static_cast<int>(std::max<int64_t>(
        1, std::min<int64_t>(
               100, absl::ToInt64Milliseconds(deadline - absl::Now()))));
    if (poll(fds.data(), fds.size(), left_ms) <= 0) {
      ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
      continue;
    }
    for (const pollfd& p : fds) {
      ares_process_fd(
          channel,
          (p.revents & (POLLIN | POLLERR | POLLHUP)) ? p.fd : ARES_SOCKET_BAD,
          (p.revents & POLLOUT) ? p.fd : ARES_SOCKET_BAD);
    }
  }
  ares_destroy(channel);  // cancels a query still pending
  // As getfqdn: only a name with a dot is an upgrade over the bare host.
  if (query.name.find('.') != std::string::npos) return query.name;
  return host;
}

std::string LocalFqdn(absl::Duration timeout) {
  return Fqdn(LocalHostname(), timeout);
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

}  // namespace distjob
