// The embedded rendezvous store: StoreCore served over gRPC's asynchronous
// API from completion-queue threads (one for a small job), so a blocked get
// or watch holds no thread and a request wakes no thread but its queue's.
#ifndef DISTJOB_RENDEZVOUS_STORE_SERVER_STORE_SERVER_H_
#define DISTJOB_RENDEZVOUS_STORE_SERVER_STORE_SERVER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/store/server/conn_limiter.h"
#include "rendezvous/store/store_core.h"
#include "rendezvous/store/store_credentials.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace distjob {

class GrpcFdAcceptor;
class StorePeerCalls;

class StoreServer {
 public:
  // Listens on `host`:`port` (port 0: a free one). Fails with
  // AlreadyExists-like Unavailable when the port is taken: SO_REUSEPORT is
  // off so a second agent on the same machine becomes a client instead.
  // With a token in `security`, every call without it is UNAUTHENTICATED;
  // with TLS in it, the server speaks only TLS. `host` is an IP address
  // ("::": dual stack); connections are accepted by a ConnLimiter under
  // `conns` and handed to gRPC.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(
      const std::string& host, int port, StoreLimits limits = {},
      const StoreSecurity& security = {}, ConnLimits conns = {});
  ~StoreServer();  // out of line: StorePeerCalls is store_server.cc's

  int port() const { return port_; }
  StoreCore* core() { return core_.get(); }
  void Shutdown();

  // The core's snapshot plus the gRPC requests answered so far.
  StoreStats Stats();

  // Calls that arrived on each of the server's completion queues
  // (StoreLimits::completion_queues), in queue order.
  std::vector<int64_t> QueueCalls() const;

  // Times a completion-queue thread's blocking wait returned an event, as
  // opposed to a poll finding one (StoreLimits::busy_poll): how often the
  // server paid for a wake-up.
  int64_t Sleeps() const;

  // Indexes of the methods counted in requests_.
  enum Method {
    kSet,
    kGet,
    kAdd,
    kCompareSet,
    kAppend,
    kCheck,
    kDelete,
    kNumKeys,
    kList,
    kWatch,
    kMethods
  };
  static constexpr int kCodes = 17;  // absl::StatusCode 0..16
  using RequestCounts =
      std::array<std::array<std::atomic<int64_t>, kCodes>, kMethods>;

 private:
  StoreServer() = default;
  class Service;
  std::unique_ptr<StoreCore> core_;
  // Bumped on every answer from gRPC threads, read only at scrape time:
  // relaxed atomics, no lock on the request path.
  std::unique_ptr<RequestCounts> requests_;
  // Before server_: calls still finishing while it shuts down release here.
  std::unique_ptr<StorePeerCalls> peers_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  // Feeds server_ through acceptor_; stopped before server_ shuts down.
  std::unique_ptr<GrpcFdAcceptor> acceptor_;
  std::unique_ptr<ConnLimiter> conns_;
  int port_ = 0;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_SERVER_STORE_SERVER_H_
