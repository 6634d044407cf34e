// The agent's HTTP endpoint (--metrics-port), for clusters and tools that
// only speak HTTP: Prometheus scrapes and HTTP probes.
//   /metrics  the registry (agent/metrics.h) in the Prometheus text format
//   /healthz  200 while the agent's loop is alive, 503 otherwise
//   /readyz   200 only while the workers run, 503 otherwise
// The same liveness and readiness as the gRPC health services
// (agent/health.h). It runs on its own thread, so a scrape is answered
// however busy the supervision loop is.
//
// A small HTTP/1.1 responder (GET and HEAD, one request per connection)
// rather than a library: cpp-httplib 0.11 (Debian ships it only as a
// shared library linked to OpenSSL; upstream's single header was tried)
// made the static binary 140 KB larger than this responder does, with its
// std::regex routing, where the 15 MB budget had 48 KB left
// (tests/blackbox/test_static_binary.py).
#ifndef DISTJOB_AGENT_HTTP_SERVER_H_
#define DISTJOB_AGENT_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "agent/metrics.h"

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
  // Stops listening and joins the thread, within the per-request timeout.
  void Shutdown();

 private:
  HttpServer() = default;
  void Serve();
  void Answer(int connection);
  // Status line, headers and body for `method` and `path`.
  std::string Respond(const std::string& method, const std::string& path);

  Metrics* metrics_ = nullptr;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: Shutdown wakes the serving thread
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> live_{true};
  std::atomic<bool> ready_{false};
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_HTTP_SERVER_H_
