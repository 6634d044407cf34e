// --rdzv-endpoint and --rdzv-conf as torchrun reads them (same keys, same
// defaults), and the "is this endpoint me?" decision for hosting the store.
#ifndef DISTJOB_RENDEZVOUS_RDZV_CONFIG_H_
#define DISTJOB_RENDEZVOUS_RDZV_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distjob {

inline constexpr int kDefaultC10dPort = 29400;

struct Endpoint {
  std::string host;  // without brackets
  int port = kDefaultC10dPort;
  // HOST:PORT with an IPv6 host bracketed.
  std::string ToString() const;
};

// HOST, HOST:PORT, [V6] or [V6]:PORT; empty means localhost.
absl::StatusOr<Endpoint> ParseEndpoint(const std::string& text,
                                       int default_port = kDefaultC10dPort);

struct RdzvConfig {
  absl::Duration join_timeout = absl::Seconds(600);
  absl::Duration last_call_timeout = absl::Seconds(30);
  absl::Duration close_timeout = absl::Seconds(30);
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  absl::Duration keep_alive_interval = absl::Seconds(5);
  int keep_alive_max_attempt = 3;
  absl::Duration read_timeout = absl::Seconds(60);
  std::optional<bool> is_host;
  // Not a torchrun key (torchrun fixes it at 300 s); accepted here too.
  absl::Duration exit_barrier_timeout = absl::Seconds(300);
  // Not a torchrun key: bounds group rank 0's one pass resolving the
  // round's members for the workers' store's allow list (a rendezvous
  // token only); the other nodes wait for it up to close_timeout.
  absl::Duration worker_store_resolve_timeout = absl::Seconds(10);
  // The store host's main limits (docs/rendezvous.md, its limits); not torchrun
  // keys. Each is bounded (kStoreLimitKeys).
  int64_t store_max_memory_mb = 256;
  int64_t store_max_value_kb = 1024;
  int64_t store_max_parked = 100000;
  int64_t store_max_conns = 4096;
  int64_t store_max_conns_per_peer = 64;
};

// k1=v1,k2=v2. Durations in seconds (fractions allowed). The etcd
// backend's own keys (etcd_prefix, ca_cert, cert, key, etcd_session_ttl)
// are accepted and left to it. Keys torchrun accepts that the agent does
// not use (store_type, timeout, ...) add a one-line notice to `notices`
// (optional) instead of failing; any other key is InvalidArgument naming
// the closest accepted key, since a typo there would otherwise only show
// as a wrong timeout minutes into the job.
absl::StatusOr<RdzvConfig> ParseRdzvConf(
    const std::string& text, std::vector<std::string>* notices = nullptr);

// --rdzv-backend, as torchrun spells the ones the agent implements.
enum class RdzvBackend { kStatic, kC10d, kEtcd, kEtcdV3 };

// static | c10d | etcd | etcd-v3; anything else is InvalidArgument.
absl::StatusOr<RdzvBackend> ParseRdzvBackend(const std::string& text);
const char* RdzvBackendName(RdzvBackend backend);

// The candidate nearest to `word` by edit distance, or empty when none is
// close enough to be a plausible typo.
std::string ClosestMatch(const std::string& word,
                         const std::vector<std::string>& candidates);

// True if `host` names this machine: localhost, a loopback literal, the
// hostname, any name under it (FQDN, <hostname>.<subdomain>), or an
// address of a local interface. Uses no NSS.
bool IsLocalHost(const std::string& host);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_CONFIG_H_
