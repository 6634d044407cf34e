// How many connections a server of the agent may hold open within the
// process's open-file limit. One agent can host both stores at once (the
// rendezvous store, two descriptors a connection:
// rendezvous/store/conn_limiter.h; the workers' TCPStore, one:
// workerstore/tcpstore_server.h) beside its own pipes and files, so
// each store gets half of what the limit leaves after those. Here, below
// both, so that neither store's package reaches the other's.
#ifndef DISTJOB_COMMON_FD_BUDGET_H_
#define DISTJOB_COMMON_FD_BUDGET_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace distjob {

// Descriptors kept for everything else (logs, workers' pipes, the agent's
// own channels).
constexpr size_t kOtherFds = 256;

// Raises the soft RLIMIT_NOFILE to the hard limit (once is enough; the
// workers inherit it), then answers how many connections of
// `fds_per_connection` descriptors fit in half of what the limit leaves
// after kOtherFds: at least 16; SIZE_MAX when the limit is infinite or
// cannot be read.
size_t ConnectionsThatFit(size_t fds_per_connection);

// A store's caps cut to that: *total to ConnectionsThatFit, logged once
// naming the cap (`what`: "tcpstore: max_connections"), and *per_peer to
// *total.
void FitConnections(size_t fds_per_connection, absl::string_view what,
                    size_t* total, size_t* per_peer);

}  // namespace distjob

#endif  // DISTJOB_COMMON_FD_BUDGET_H_
