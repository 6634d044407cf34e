#include "common/net.h"

#include <ares.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
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
#include "common/ares_poll.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/listen.h"
#include "common/socket_address.h"
#include "common/text.h"

namespace distjob {

bool IsIpLiteral(absl::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // inet_pton needs a NUL-terminated string, so an embedded NUL would
  // hide whatever follows it.
  if (host.find('\0') != absl::string_view::npos) return false;
  const std::string h(host);
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

absl::Status CheckHostName(absl::string_view host, absl::string_view what) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", QuoteForMessage(host), ": ", why,
        "; expected an IP address or a DNS name (labels of letters, digits, "
        "'-' and '_', not starting with '-')"));
  };
  if (host.empty()) return invalid("empty host name");
  if (IsIpLiteral(host)) return absl::OkStatus();
  if (host.size() > 254 || (host.size() == 254 && host.back() != '.')) {
    return invalid("longer than 253 bytes");
  }
  absl::string_view name = host;
  if (name.back() == '.') name.remove_suffix(1);
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty()) return invalid("empty label");
    if (label.size() > 63) return invalid("a label is longer than 63 bytes");
    if (label.front() == '-' || label.back() == '-') {
      return invalid("a label starts or ends with '-'");
    }
    for (char c : label) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!ok) return invalid("not a DNS name");
    }
  }
  return absl::OkStatus();
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

// getfqdn's choice from a hosts-file line naming `host`: the first of its
// names (canonical, then aliases) with a dot, else `host`; "" when no line
// names it (NSS asks DNS only then).
std::string FqdnFromHostsFile(const std::string& host,
                              const std::string& path) {
  for (absl::string_view line : absl::StrSplit(ReadSmallFile(path), '\n')) {
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
  PollAres(channel, deadline, [&query] { return query.done; });
  ares_destroy(channel);  // cancels a query still pending
  // As getfqdn: only a name with a dot is an upgrade over the bare host.
  if (query.name.find('.') != std::string::npos) return query.name;
  return host;
}

std::string LocalFqdn(absl::Duration timeout) {
  return Fqdn(LocalHostname(), timeout);
}

absl::StatusOr<int> FindFreePort(const std::string& address) {
  if (absl::Status s = CheckHostName(address, "local address"); !s.ok()) {
    return s;
  }
  // A name is not resolved (that would go through the image's NSS
  // modules, see CheckHostName's callers): the port is then taken free on
  // every interface, which includes whichever the name stands for.
  absl::string_view literal = address;
  if (!IsIpLiteral(literal)) literal = "0.0.0.0";
  const SocketAddress addr =
      ParseSocketAddress(literal, 0).value_or(SocketAddress{});
  const int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return ErrnoError(errno,
                      absl::StrCat("binding a free port on '", address, "'"));
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  const int port = bind(fd, addr.get(), addr.length) == 0 ? BoundPort(fd) : 0;
  if (port == 0) {
    return ErrnoError(errno,
                      absl::StrCat("binding a free port on '", address, "'"));
  }
  return port;
}

}  // namespace distjob
