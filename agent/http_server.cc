#include "agent/http_server.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace distjob {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    int port, Metrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *http->server_;
  // Probes and scrapes are short: a stuck client must not hold a thread.
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_max_count(100);
  server.Get("/metrics",
             [metrics](const httplib::Request&, httplib::Response& response) {
               response.set_content(metrics->Render(),
                                    "text/plain; version=0.0.4; charset=utf-8");
             });
  HttpServer* self = http.get();
  auto probe = [](const std::atomic<bool>& state, httplib::Response& response) {
    const bool ok = state.load();
    response.status = ok ? 200 : 503;
    response.set_content(ok ? "ok\n" : "not ready\n", "text/plain");
  };
  server.Get("/healthz", [self, probe](const httplib::Request&,
                                       httplib::Response& response) {
    probe(self->live_, response);
  });
  server.Get("/readyz", [self, probe](const httplib::Request&,
                                      httplib::Response& response) {
    probe(self->ready_, response);
  });
  const bool bound = port == 0
                         ? (http->port_ = server.bind_to_any_port("::")) > 0
                         : server.bind_to_port("::", port);
  if (!bound) {
    // No IPv6 in this pod: IPv4 alone.
    if (port == 0) {
      http->port_ = server.bind_to_any_port("0.0.0.0");
    } else if (server.bind_to_port("0.0.0.0", port)) {
      http->port_ = port;
    }
    if (http->port_ <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-port: cannot listen on port ", port,
          " (in use, or not allowed); give a free port or 0 for none"));
    }
  } else if (port != 0) {
    http->port_ = port;
  }
  http->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  return http;
}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  if (server_ == nullptr) return;
  live_ = false;
  ready_ = false;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace distjob
