#include "common/resolver.h"

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ares_poll.h"
#include "common/text.h"

namespace distjob {
namespace {

struct Query {
  std::string name;
  std::vector<std::string> addresses;
};

void OnAddrinfo(void* arg, int status, int /*timeouts*/,
                ares_addrinfo* result) {
  auto* query = static_cast<Query*>(arg);
  if (status != ARES_SUCCESS || result == nullptr) {
    if (result != nullptr) ares_freeaddrinfo(result);
    return;
  }
  for (ares_addrinfo_node* node = result->nodes; node != nullptr;
       node = node->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr = nullptr;
    if (node->ai_family == AF_INET) {
      addr = &reinterpret_cast<sockaddr_in*>(node->ai_addr)->sin_addr;
    } else if (node->ai_family == AF_INET6) {
      addr = &reinterpret_cast<sockaddr_in6*>(node->ai_addr)->sin6_addr;
    }
    if (addr != nullptr &&
        inet_ntop(node->ai_family, addr, buf, sizeof(buf)) != nullptr &&
        std::find(query->addresses.begin(), query->addresses.end(), buf) ==
            query->addresses.end()) {
      query->addresses.emplace_back(buf);
    }
  }
  ares_freeaddrinfo(result);
}

absl::Status LibraryInit() {
  static const int rc = ares_library_init(ARES_LIB_INIT_ALL);
  if (rc != ARES_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("c-ares initialisation failed: ", ares_strerror(rc)));
  }
  return absl::OkStatus();
}

std::string Unbracket(const std::string& host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host[0] != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<Addresses> ResolveNames(const std::vector<std::string>& names,
                                       const ResolverOptions& options) {
  if (absl::Status s = LibraryInit(); !s.ok()) return s;
  ares_options opts{};
  opts.timeout = static_cast<int>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options.query_timeout)));
  opts.tries = 1;
  // Set, not read from nsswitch.conf: its modules are glibc's (c-ares
  // would take "hosts: files" alone as "never ask DNS"). The hosts file
  // answers A and AAAA at once; DNS is asked only for names it lacks.
  char lookups_hosts_then_dns[] = "fb";
  char lookups_dns_only[] = "b";
  opts.lookups =
      options.servers.empty() ? lookups_hosts_then_dns : lookups_dns_only;
  ares_channel channel = nullptr;
  if (int rc = ares_init_options(
          &channel, &opts,
          ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS);
      rc != ARES_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("cannot set up DNS resolution: ", ares_strerror(rc)));
  }
  if (!options.servers.empty()) {
    const std::string csv = absl::StrJoin(options.servers, ",");
    if (int rc = ares_set_servers_ports_csv(channel, csv.c_str());
        rc != ARES_SUCCESS) {
      ares_destroy(channel);
      return absl::InvalidArgumentError(
          absl::StrCat("--dns-server '", csv,
                       "' is not IP[:PORT][,...]: ", ares_strerror(rc)));
    }
  }
  std::vector<Query> queries(names.size());
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;  // A and AAAA
  hints.ai_socktype = SOCK_STREAM;
  for (size_t i = 0; i < names.size(); ++i) {
    queries[i].name = names[i];
    const std::string lookup = Unbracket(names[i]);
    // A literal is its own address. c-ares would answer its own family at
    // once but still ask DNS for the other one (an AAAA query for
    // "127.0.0.1"), which holds a probe as long as the server takes.
    unsigned char buf[16];
    if (inet_pton(AF_INET, lookup.c_str(), buf) == 1 ||
        inet_pton(AF_INET6, lookup.c_str(), buf) == 1) {
      queries[i].addresses = {lookup};
      continue;
    }
    ares_getaddrinfo(channel, lookup.c_str(), nullptr, &hints, OnAddrinfo,
                     &queries[i]);
  }
  PollAres(channel, absl::Now() + options.pass_timeout, options.cancelled);
  ares_destroy(channel);  // completes any query still pending
  Addresses out;
  for (Query& q : queries) out[q.name] = std::move(q.addresses);
  return out;
}

absl::StatusOr<std::vector<std::string>> ResolveHost(
    const std::string& host, const ResolverOptions& options) {
  auto resolved = ResolveNames({host}, options);
  if (!resolved.ok()) return resolved.status();
  std::vector<std::string>& addresses = (*resolved)[host];
  if (addresses.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "host ", QuoteForMessage(host),
        " is neither in /etc/hosts nor in DNS (looked up for at most ",
        absl::FormatDuration(options.pass_timeout), ")"));
  }
  return std::move(addresses);
}

absl::StatusOr<GrpcTarget> GrpcTargetFor(
    const std::string& host, int port,
    const std::vector<std::string>& addresses) {
  if (addresses.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no address for ", QuoteForMessage(host)));
  }
  GrpcTarget t;
  t.host = Unbracket(host);
  t.authority = JoinHostPort(t.host, port);
  unsigned char buf[16];
  const bool v4 = inet_pton(AF_INET, addresses[0].c_str(), buf) == 1;
  std::vector<std::string> parts;
  for (const std::string& a : addresses) {
    if (inet_pton(AF_INET, a.c_str(), buf) == 1) {
      if (v4) parts.push_back(absl::StrCat(a, ":", port));
    } else if (inet_pton(AF_INET6, a.c_str(), buf) == 1) {
      if (!v4) parts.push_back(absl::StrCat("[", a, "]:", port));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteForMessage(a), " (an address of ",
                       QuoteForMessage(host), ") is not an IP address"));
    }
  }
  t.target = absl::StrCat(v4 ? "ipv4:" : "ipv6:", absl::StrJoin(parts, ","));
  return t;
}

absl::StatusOr<GrpcTarget> ResolveGrpcTarget(
    const std::string& host, int port, absl::Duration timeout,
    const std::function<bool()>& cancelled) {
  ResolverOptions options;
  options.cancelled = cancelled;
  options.query_timeout = timeout;
  options.pass_timeout = timeout;
  auto addresses = ResolveHost(host, options);
  if (!addresses.ok()) return addresses.status();
  return GrpcTargetFor(host, port, *addresses);
}

absl::StatusOr<GrpcTarget> ResolveGrpcEndpoint(
    const std::string& endpoint, absl::Duration timeout,
    const std::function<bool()>& cancelled) {
  const size_t colon = endpoint.rfind(':');
  std::string host =
      colon == std::string::npos ? "" : endpoint.substr(0, colon);
  int port = 0;
  if (host.empty() ||
      (host.find(':') != std::string::npos &&
       (host.front() != '[' || host.back() != ']')) ||
      !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint ", QuoteForMessage(endpoint),
                     " is not HOST:PORT or [IPV6]:PORT"));
  }
  return ResolveGrpcTarget(Unbracket(host), port, timeout, cancelled);
}

}  // namespace distjob
