// The agent's one name resolver: c-ares reading /etc/hosts first, then DNS
// through /etc/resolv.conf (its servers and search domains), each query
// bounded. glibc's getaddrinfo is never used: in a static binary it goes
// through NSS, which dlopen()s the image's libnss_*.so and libc.so.6 (a
// mismatched glibc crashes or hangs the agent), and gRPC's own resolver
// waits for the AAAA answer of a name /etc/hosts already answered (over a
// minute when the DNS server does not answer). So gRPC channels are handed
// addresses (ResolveGrpcTarget), never names.
#ifndef DISTJOB_COMMON_RESOLVER_H_
#define DISTJOB_COMMON_RESOLVER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distjob {

struct ResolverOptions {
  // "IP[:PORT]" servers used instead of resolv.conf's (tests, debugging);
  // /etc/hosts is then skipped too, so answers come only from them.
  std::vector<std::string> servers;
  // Bounds each query to a DNS server; a name /etc/hosts answers returns
  // without asking one.
  absl::Duration query_timeout = absl::Seconds(2);
  // Bounds a whole pass: resolv.conf's search domains (ndots:5 in a pod)
  // turn one name into several queries, one after another.
  absl::Duration pass_timeout = absl::Seconds(10);
  // Ends a pass early when it returns true (a stop signal): a query to a
  // server that does not answer would hold it query_timeout.
  std::function<bool()> cancelled;
};

// Each name's addresses (IPv4 and IPv6, as text), in the resolver's order.
using Addresses = std::map<std::string, std::vector<std::string>>;

// One pass over `names`, all queries at once; a name that does not resolve
// maps to no addresses. IP literals map to themselves without a lookup.
// Errors only for a broken setup (bad `servers`, no c-ares channel).
absl::StatusOr<Addresses> ResolveNames(const std::vector<std::string>& names,
                                       const ResolverOptions& options);

// The addresses of one host (an IP literal, bracketed or not, is its own
// address). NotFound naming the host when it does not resolve.
absl::StatusOr<std::vector<std::string>> ResolveHost(
    const std::string& host, const ResolverOptions& options = {});

// A gRPC channel target that gRPC does not resolve, and the name it stands
// for. Channels set GRPC_ARG_DEFAULT_AUTHORITY to `authority`; TLS
// channels check the server's certificate against `host`
// (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG), as they would for a name target.
struct GrpcTarget {
  std::string target;     // "ipv4:10.0.0.1:29400" or "ipv6:[fd00::1]:29400"
  std::string authority;  // "host:port" as given ("[::1]:port" for IPv6)
  std::string host;       // the host as given, unbracketed
};

// The target for `addresses` (all of the first address' family, in order:
// gRPC's sockaddr resolver takes one family per target) on `port`.
// InvalidArgument when `addresses` is empty or holds a non-address.
absl::StatusOr<GrpcTarget> GrpcTargetFor(
    const std::string& host, int port,
    const std::vector<std::string>& addresses);

// Resolves `host` (ResolveHost, the whole lookup bounded by `timeout`) and
// builds its GrpcTarget. An IP literal needs no lookup.
absl::StatusOr<GrpcTarget> ResolveGrpcTarget(
    const std::string& host, int port, absl::Duration timeout,
    const std::function<bool()>& cancelled = nullptr);

// Splits "host:port" / "[v6]:port" (the host unbracketed) and resolves it.
absl::StatusOr<GrpcTarget> ResolveGrpcEndpoint(
    const std::string& endpoint, absl::Duration timeout,
    const std::function<bool()>& cancelled = nullptr);

// "host:port", with an IPv6 literal bracketed.
std::string JoinHostPort(const std::string& host, int port);

}  // namespace distjob

#endif  // DISTJOB_COMMON_RESOLVER_H_
