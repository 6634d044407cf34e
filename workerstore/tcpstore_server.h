// A server of PyTorch's TCPStore wire protocol (torch.distributed.TCPStore
// clients, is_master=False, of 1.13 and of 2.x), so the agent can host the
// workers' store the way torchrun 2.x does (TORCHELASTIC_USE_AGENT_STORE).
// One thread serves every connection from an epoll loop: a blocking wait
// or get parks the connection's request and is answered by the write that
// completes it, so thousands of clients cost a socket and a few buffers
// each. The keys live in this server only: workers never see the
// rendezvous store's keys. Frames are parsed by tcpstore_protocol.h.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_SERVER_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "workerstore/tcpstore_limits.h"

namespace distjob {

struct TcpStoreServerOptions {
  // A numeric address to listen on ("::" listens on IPv4 too; a host
  // without IPv6 falls back to "0.0.0.0"), and the port (0: any free one,
  // read back with port()).
  std::string host = "::";
  int port = 0;
  // As SetAllowedPeers, in force from the first connection on.
  std::vector<std::string> allowed_peers;
  // Keys, values, requests and parked waits (tcpstore_limits.h).
  TcpStoreLimits limits;
  // Open connections in all, and from one peer address (a 1.13 client
  // opens two). One address holds at most a quarter of max_connections,
  // of max_waiters and of max_waiter_bytes (PeerBudgets::kShare): with
  // one full, the newest of the address that holds the most gives way.
  // 16384 (not 65536): at the cap, the connections' own memory (counted
  // in max_buffered_bytes) and the kernel's for their sockets fit a 1 GiB
  // container beside the keys (docs/worker-store.md, *TCPStore-protocol
  // server*).
  size_t max_connections = 16384;
  size_t max_connections_per_peer = 4096;
  // The connections the job's declared size brings (agent/fd_needs.h: two
  // a rank); 0: none declared. Past max_connections, it raises that cap,
  // and the caps a connection multiplies grow for each connection the
  // open-file limit then leaves (tcpstore_sizing.h), so that a job of
  // 100K ranks is admitted without flags. The operator declares it; no
  // client can change it.
  size_t expected_connections = 0;
  // One request frame (a multi_set with all its keys and values).
  size_t max_frame_bytes = size_t{64} << 20;
  // Answers queued for a client that does not read them; past this the
  // server stops reading that client's requests until it drains.
  size_t max_pending_output_bytes = size_t{16} << 20;
  // Every connection's memory, together: its buffers (requests received
  // in part, answers not yet sent, and what an idle one keeps: at most
  // 4 KiB) and a fixed 1 KiB for its bookkeeping. Past it, the connection
  // holding the most is closed, until they are back under it; a new
  // connection that would take it past is refused. Without it each
  // connection's own bounds (a frame, the pending output) multiplied by
  // max_connections.
  size_t max_buffered_bytes = size_t{256} << 20;
  // How long the loop polls for the next request, rather than sleep, after
  // its last work: a request that finds the loop asleep waits for its
  // wake-up before it is served, and one client's next request, sent on its
  // answer, finds it awake (docs/worker-store.md). The loop polls
  // only while the last wait for work was shorter than this, so sparse
  // traffic costs at most this much of one core per gap longer than it.
  // Zero: sleep as soon as there is nothing to do.
  absl::Duration busy_poll = absl::Microseconds(50);
  // After two batches of sets in a row that answered no one (a client
  // streaming sets, which TCPStore's clients send without an answer),
  // the loop pauses this long (plus the kernel's timer slack) before it
  // reads again, so that one read takes many sets: each read that drains a
  // socket makes the kernel acknowledge at once, and per set the client's
  // TCP stack handled ~2.7 acknowledgements where a read behind the stream
  // leaves ~0.1 (docs/worker-store.md). A request that needs an
  // answer and arrives during the pause waits for its end. Zero: no pause.
  absl::Duration set_stream_pause = absl::Microseconds(50);
  // How long Clear() waits for the loop to come to it. A pass of the loop
  // serves one batch of events, so a clear takes milliseconds unless the
  // loop is starved of CPU; the bound keeps a stop signal's wait short.
  absl::Duration clear_timeout = absl::Seconds(5);
};

struct TcpStoreStats {
  int64_t keys = 0;
  int64_t bytes = 0;  // counted as against max_total_bytes
  int64_t clients = 0;
  int64_t parked_waits = 0;
  // Requests served by operation name ("set", "get", "wait", ...).
  std::map<std::string, int64_t> requests;
  // Connections closed for a malformed, unknown or over-limit request.
  int64_t protocol_errors = 0;
  // Connections refused at accept (SetAllowedPeers, connection limits).
  int64_t refused_connections = 0;
  // Connections closed to make room for another address's connection or
  // wait, a budget being full (PeerBudgets).
  int64_t evictions = 0;
  // Every connection's memory, as counted against max_buffered_bytes.
  int64_t buffered_bytes = 0;
  // Times accepting stopped because the process was out of file
  // descriptors (it resumes once a client leaves, or after a second).
  int64_t accept_pauses = 0;
  // Times the loop waited for work outside a poll (blocking) and got some:
  // each found it asleep, or about to sleep.
  int64_t sleeps = 0;
  // Times the loop paused before reading a stream of unanswered requests
  // (TcpStoreServerOptions::set_stream_pause).
  int64_t stream_pauses = 0;
};

class TcpStoreServer {
 public:
  // Listening when it returns. Unavailable naming host:port when the port
  // is taken; InvalidArgument for a host that is not a numeric address.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const TcpStoreServerOptions& options);
  ~TcpStoreServer();  // Shutdown()
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const;
  // Idempotent; ends within a second and closes every client.
  void Shutdown();
  TcpStoreStats Stats();
  // Restricts which client addresses may connect (empty: anyone); the
  // addresses are numeric IPv4 or IPv6 (an IPv4-mapped IPv6 peer matches
  // its IPv4 form). Loopback is not implied: list "127.0.0.1" and "::1" to
  // admit it. Connections already open stay (Clear closes them).
  // Thread-safe; the agent admits only the round's members when the job has
  // a rendezvous token, since a TCPStore client cannot present one.
  void SetAllowedPeers(std::vector<std::string> ips);
  // Drops every key and queue, as a fresh store; returns once done, or
  // DeadlineExceeded when the loop has not come to it within clear_timeout
  // (it still clears when it does, so the caller must not hand this store
  // to a new group then). The agent calls it when a new round closes, and
  // before each attempt of a one-node job, before the workers learn the
  // address: 1.13's workers keep the same prefix (/worker/attempt_<restart
  // count>) across a membership change, and PyTorch 2.11's use none at
  // all, so the last
  // group's keys (its barrier counters, its ranks' addresses) would
  // otherwise meet the new group's. Every connection open then is closed
  // with its parked waits: the last group's workers have exited, or were
  // left out of the round and must not write into the new group's keys.
  absl::Status Clear();

  class Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_SERVER_H_
