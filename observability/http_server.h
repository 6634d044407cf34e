// The agent's HTTP endpoint (--metrics-port), for clusters and tools that
// only speak HTTP: Prometheus scrapes and HTTP probes.
//   /metrics  the registry (observability/metrics.h) in the Prometheus text
//   format /healthz  200 while the agent's loop is alive, 503 otherwise /readyz
//   200 only while the workers run, 503 otherwise
// The same liveness and readiness as the gRPC health services
// (agent/health.h). Served by libevent's evhttp on an event loop of its own
// thread: connections are answered concurrently, so a slow or silent client
// delays no other scrape or probe, and the supervision loop delays none.
// A request head must arrive within 1 s, and a connection past the cap
// evicts the oldest idle one: silent connections from the network cannot
// starve a kubelet probe.
#ifndef DISTJOB_OBSERVABILITY_HTTP_SERVER_H_
#define DISTJOB_OBSERVABILITY_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "observability/metrics.h"

struct bufferevent;
struct event;
struct event_base;
struct evconnlistener;
struct evhttp;
struct evhttp_connection;
struct evhttp_request;
struct ssl_ctx_st;

namespace distjob {

// One answer of an endpoint that is not the metrics one.
struct HttpAnswer {
  int code = 200;
  std::string body;
};

struct HttpServerOptions {
  // 0 picks a free one.
  int port = 0;
  // The flag a port that cannot be bound is blamed on.
  std::string port_flag = "--metrics-port";
  // Set: every GET or HEAD, whatever its path, is answered by this (on the
  // server's thread; it must be thread-safe and quick), and the metrics
  // may be null. TORCHELASTIC_HEALTH_CHECK_PORT has no paths.
  std::function<HttpAnswer()> answer_all;
  // PEM files: with both, the endpoint speaks HTTPS only.
  std::string tls_cert;
  std::string tls_key;
  // A connection that reads no answer in this long is closed: a deadline
  // from when its request arrived, which a slow reader does not push back.
  absl::Duration timeout = absl::Seconds(5);
  // A connection that sends no complete request head in this long (or
  // `timeout` if shorter) is closed: from when it opened or its last answer
  // was sent (an idle keep-alive connection), however its bytes drip in.
  absl::Duration head_timeout = absl::Seconds(1);
  // Connections held at once; a new one past this evicts the oldest idle
  // connection (one not being answered). Scrapers and probers hold one or
  // two each.
  int max_connections = 64;
};

class HttpServer {
 public:
  // Listens on `::` with IPv6-only off (IPv4 and IPv6 both), or on
  // 0.0.0.0 where the pod has no IPv6. InvalidArgument naming
  // --metrics-port when the port cannot be bound, or --metrics-tls-cert /
  // --metrics-tls-key with the file and OpenSSL's reason when it does not
  // load.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& options, Metrics* metrics);
  ~HttpServer();

  int port() const { return port_; }
  void SetLive(bool live) { live_ = live; }
  void SetReady(bool ready) { ready_ = ready; }
  // Closes the listener and every connection and joins the thread; returns
  // at once (the event loop is woken, nothing is waited for).
  void Shutdown();

 private:
  HttpServer() = default;
  absl::Status Listen(const HttpServerOptions& options);
  static void Handle(evhttp_request* request, void* self);
  static bufferevent* NewConnection(event_base* base, void* self);
  static void Track(int, short, void* self);  // NOLINT(runtime/int)
  // A tracked connection: its deadline (a timer that frees it) and its
  // place in the eviction order (least recently active first).
  struct Tracked {
    HttpServer* server;
    evhttp_connection* connection;
    event* timer;
    std::list<Tracked*>::iterator position;
    bool answering;  // a request arrived, its answer is not sent yet
  };
  void TrackPending();
  void EvictOldest();
  static void DeadlinePassed(int, short, void* tracked);  // NOLINT
  static void Closed(evhttp_connection*, void* tracked);
  static void Answered(evhttp_request*, void* tracked);
  void Arm(Tracked* tracked, absl::Duration deadline);

  Metrics* metrics_ = nullptr;
  std::function<HttpAnswer()> answer_all_;
  ssl_ctx_st* tls_ = nullptr;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  event* stop_event_ = nullptr;
  int stop_fd_ = -1;  // eventfd: Shutdown wakes the event loop
  int port_ = 0;
  // Touched on the event loop's thread only.
  int connections_ = 0;
  int max_connections_ = 0;
  absl::Duration timeout_;
  absl::Duration head_timeout_;
  std::vector<bufferevent*> tracking_;  // new, not yet given a close callback
  std::unordered_map<evhttp_connection*, Tracked*> tracked_;  // owned
  std::list<Tracked*> order_;  // least recently active first
  std::thread thread_;
  std::atomic<bool> live_{true};
  std::atomic<bool> ready_{false};
};

}  // namespace distjob

#endif  // DISTJOB_OBSERVABILITY_HTTP_SERVER_H_
