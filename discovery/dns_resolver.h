// Peer-name readiness through c-ares: a peer's headless-service record
// exists only once its pod is Ready, so names are looked up again and again
// (A and AAAA, /etc/resolv.conf and its search domains, or --dns-server)
// with exponential backoff until all resolve or the deadline passes, each
// pass through the agent's one resolver (common/resolver), so nothing,
// negative answers included, is cached.
#ifndef DISTJOB_DISCOVERY_DNS_RESOLVER_H_
#define DISTJOB_DISCOVERY_DNS_RESOLVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/resolver.h"

namespace distjob {

struct DnsOptions {
  // Each pass's servers, query bound and stop check. Its `cancelled` is
  // also polled between passes (at least every 100 ms), so a stop signal is
  // not held up by a missing peer; its `pass_timeout` is cut to what is
  // left of `timeout`.
  ResolverOptions resolver;
  absl::Duration timeout = absl::Minutes(5);
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
};

// Resolves until every name has an address. On timeout: DeadlineExceeded
// naming the missing names.
absl::StatusOr<Addresses> WaitForNames(const std::vector<std::string>& names,
                                       const DnsOptions& options);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_DNS_RESOLVER_H_
