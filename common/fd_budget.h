// How many connections a server of the agent may hold open within the
// process's open-file limit. One agent can host both stores at once (the
// rendezvous store, two descriptors a connection:
// rendezvous/store/server/conn_limiter.h; the workers' TCPStore, one:
// workerstore/tcpstore_server.h) beside its own pipes and files. Each
// store's cap is what the limit leaves after those and after the other
// store's real need, the connections the job's declared size brings it:
// halving the limit between them cut a one-worker job's store as if it
// shared the process with a 10,000-node rendezvous. Here, below both, so
// that neither store's package reaches the other's.
#ifndef DISTJOB_COMMON_FD_BUDGET_H_
#define DISTJOB_COMMON_FD_BUDGET_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace distjob {

// Descriptors kept for everything else (logs, workers' pipes, the agent's
// own channels, the health server's few connections).
constexpr size_t kOtherFds = 256;
// The fewest connections a cut leaves a server.
constexpr size_t kMinConnections = 16;

// The servers that share the process's descriptors.
enum class FdUser {
  kRendezvousStore,  // the c10d host's store: one connection a node
  kWorkerStore,      // the workers' TCPStore: its ranks' connections
  kOther,            // anything else (the health server): within kOtherFds
};

// The open-file limit before and after RaiseOpenFileLimit.
struct OpenFileLimit {
  uint64_t soft_before = 0;
  uint64_t soft = 0;
  uint64_t hard = 0;
  bool raised() const { return soft > soft_before; }
};

// Raises the soft RLIMIT_NOFILE to the hard limit; the workers inherit it.
// Called once, from main, before any server listens: a soft limit of
// 1,024 (many runtimes' default) holds no large job's connections, and the
// hard limit is what the pod was given. Best effort: the limits are
// answered as they are after it (zeros when they cannot be read).
OpenFileLimit RaiseOpenFileLimit();

// The arithmetic: connections of `fds_per_connection` descriptors that fit
// in an open-file limit of `limit` after kOtherFds and `others_fds` (the
// other servers' real need): at least kMinConnections; SIZE_MAX when the
// limit is RLIM_INFINITY.
size_t ConnectionsThatFit(uint64_t limit, size_t fds_per_connection,
                          size_t others_fds);

// What `user` really needs for the job as declared (its size, not its
// caps): `connections` of `fds_per_connection` descriptors. Declared by
// the agent before its servers start; undeclared, a server needs nothing
// of the others' share (a server alone in its process: benchmarks, tests).
void DeclareConnectionNeed(FdUser user, size_t connections,
                           size_t fds_per_connection);
// The declared connections of `user` (0: none declared).
size_t DeclaredConnections(FdUser user);

// A server's caps cut to what fits under the current soft limit after the
// other servers' declared need: *total to that, *per_peer to *total. One
// line per `user` (`what` names the cap: "tcpstore: max_connections"): a
// cut at info; a warning naming the numbers when the cap, cut or not, is
// below `user`'s declared need.
void FitConnections(FdUser user, size_t fds_per_connection,
                    absl::string_view what, size_t* total, size_t* per_peer);

}  // namespace distjob

#endif  // DISTJOB_COMMON_FD_BUDGET_H_
