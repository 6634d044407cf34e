#include "common/net.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
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

absl::StatusOr<int> FindFreePort(const std::string& address) {
  if (absl::Status s = CheckHostName(address, "local address"); !s.ok()) {
    return s;
  }
  // A name is not resolved (that would go through the image's NSS
  // modules, see CheckHostName's callers): the port is then taken free on
  // every interface, which includes whichever the name stands for.
  absl::string_view literal = address;
  if (!IsIpLiteral(literal)) literal = "0.0.0.0";
  if (literal.size() > 2 && literal.front() == '[') {
    literal = literal.substr(1, literal.size() - 2);
  }
  const std::string text(literal);
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    addr_len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    addr_len = sizeof(*v6);
  }
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return ErrnoError(errno,
                      absl::StrCat("binding a free port on '", address, "'"));
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return ErrnoError(errno,
                      absl::StrCat("binding a free port on '", address, "'"));
  }
  if (bound.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace distjob
