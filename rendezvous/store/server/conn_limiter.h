// The store host's own listening socket: it accepts connections itself and
// hands each one to gRPC, so that their number per peer address and in all
// is capped (gRPC 1.51's server has no such setting), and so that it sees
// a client's first bytes: a plaintext client of a TLS store, or a TLS
// client of a plaintext store, is answered at once with what to configure
// instead of failing like an unreachable store.
#ifndef DISTJOB_RENDEZVOUS_STORE_SERVER_CONN_LIMITER_H_
#define DISTJOB_RENDEZVOUS_STORE_SERVER_CONN_LIMITER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/fd_budget.h"
#include "rendezvous/store/tls_mismatch.h"

namespace distjob {

struct ConnLimits {
  // Connections from one peer address; past it a new one is closed at once.
  size_t max_conns_per_peer = 64;
  // Connections in all. Past it a new connection takes the place of the
  // oldest one of the address holding the most (when that address holds
  // more than the newcomer's), so that a flood from a few addresses cannot
  // lock a real member out; else it is closed. Cut to what the fd limit
  // leaves after the other servers' need (each connection holds two fds:
  // common/fd_budget.h).
  size_t max_conns = 4096;
  // A connection that sends nothing in this long is closed.
  absl::Duration first_bytes_timeout = absl::Seconds(10);
  // gRPC closes a connection that carries no call for this long (the store
  // server's channel argument); a real client reconnects on its next call.
  absl::Duration idle_timeout = absl::Seconds(60);
  // Names the server and its caps in logs and errors (the health server
  // uses this class too).
  std::string name = "rendezvous store";
  std::string total_cap = "store_max_conns";
  std::string peer_cap = "store_max_conns_per_peer";
  // Whose share of the open-file limit the caps are cut to.
  FdUser fd_user = FdUser::kRendezvousStore;
};

struct ConnStats {
  int64_t open = 0;               // accepted and not yet closed
  int64_t refused = 0;            // closed at once: a cap was reached
  int64_t evicted = 0;            // closed to make room under max_conns
  int64_t protocol_mismatch = 0;  // TLS to a plaintext store, or the reverse
};

class ConnLimiter {
 public:
  // Gets an accepted, non-blocking connection; from then on the fd is its
  // to close (gRPC's acceptor). Counts drop when the socket is shut down.
  using Handoff = std::function<void(int fd)>;

  // Listens on `host`:`port` (an IP literal; "::" is dual stack; port 0: a
  // free one). Unavailable when the port is taken. `tls`: the server
  // speaks TLS (a plaintext HTTP/2 client is answered with a gRPC error
  // saying so), else plaintext (a TLS client is answered with bytes its
  // TLS layer reports as a wrong version). Raises RLIMIT_NOFILE's soft
  // limit to the hard one so that the caps, not the fd table, bind.
  static absl::StatusOr<std::unique_ptr<ConnLimiter>> Listen(
      const std::string& host, int port, ConnLimits limits, bool tls);
  ~ConnLimiter();

  int port() const { return port_; }
  size_t max_conns() const { return limits_.max_conns; }

  // Starts the accept loop's thread.
  void Start(Handoff handoff);
  // Stops accepting and closes what it holds; returns within a second.
  void Stop();

  ConnStats Stats() const;

 private:
  // The loop's state and steps (conn_limiter.cc).
  class AcceptLoop;

  ConnLimiter() = default;
  void Loop();

  ConnLimits limits_;
  bool tls_ = false;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop
  Handoff handoff_;
  std::thread thread_;
  std::atomic<int64_t> open_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> evicted_{0};
  std::atomic<int64_t> mismatch_{0};
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_SERVER_CONN_LIMITER_H_
