// What a user configures of the etcd store: its endpoints, namespace, TLS
// files and timeouts, parsed once from --rdzv-endpoint and --rdzv-conf.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_OPTIONS_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distjob {

struct EtcdStoreOptions {
  std::vector<std::string> endpoints;  // HOST:PORT, [V6]:PORT
  std::string prefix = "/distjob";
  std::string run_id = "none";
  // PEM file paths; TLS is used when ca_cert is set.
  std::string ca_cert, cert, key;
  // Bounds each call beyond its own blocking time, across all endpoints.
  absl::Duration rpc_timeout = absl::Seconds(60);
  // TTL of the job-wide lease: how long a crashed job's keys linger.
  absl::Duration session_ttl = absl::Seconds(10);
};

// Fills the etcd-specific --rdzv-conf keys (etcd_prefix, ca_cert, cert,
// key, read_timeout, etcd_session_ttl) and splits `endpoints` on commas;
// other keys are left to the rendezvous. InvalidArgument names the key.
absl::StatusOr<EtcdStoreOptions> ParseEtcdOptions(const std::string& endpoints,
                                                  const std::string& conf,
                                                  const std::string& run_id);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_OPTIONS_H_
