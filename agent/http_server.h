// The agent's HTTP endpoint (--metrics-port), for clusters and tools that
// only speak HTTP: Prometheus scrapes and HTTP probes.
//   /metrics  the registry (agent/metrics.h) in the Prometheus text format
//   /healthz  200 while the agent's loop is alive, 503 otherwise
//   /readyz   200 only while the workers run, 503 otherwise
// The same liveness and readiness as the gRPC health services
// (agent/health.h). Served by cpp-httplib on its own threads, so a scrape
// is answered however busy the supervision loop is.
#ifndef DISTJOB_AGENT_HTTP_SERVER_H_
#define DISTJOB_AGENT_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "agent/metrics.h"

namespace httplib {
class Server;
}

namespace distjob {

class HttpServer {
 public:
  // Listens on `::` with IPv6-only off (IPv4 and IPv6 both), or on
  // 0.0.0.0 where the pod has no IPv6; `port` 0 picks a free one.
  // InvalidArgument naming --metrics-port when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(int port,
                                                           Metrics* metrics);
  ~HttpServer();

  int port() const { return port_; }
  void SetLive(bool live) { live_ = live; }
  void SetReady(bool ready) { ready_ = ready; }
  // Stops listening; a request in flight is answered first.
  void Shutdown();

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> live_{true};
  std::atomic<bool> ready_{false};
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_HTTP_SERVER_H_
