#include "observability/http_server.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/listen.h"

namespace distjob {
namespace {

// A request is its head only (GET, HEAD): larger is not a scrape or probe.
constexpr ev_ssize_t kMaxHeaders = 8192;
constexpr ev_ssize_t kMaxBody = 1024;
// A PEM chain is a few tens of KB; a wrong path (a log) is not read whole.
constexpr size_t kMaxPemBytes = size_t{1} << 20;

// OpenSSL's reason for the last failure: the first error is the cause
// ("no start line"); the last is SSL's summary ("PEM lib").
std::string LoadError() {
  const unsigned long code = ERR_peek_error();  // NOLINT(runtime/int)
  ERR_clear_error();
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : "not a PEM file OpenSSL can use";
}

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;

Bio MemBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
             BIO_free);
}

// The first certificate of `pem` is the server's, the others its chain,
// as SSL_CTX_use_certificate_chain_file reads a file; from memory, so the
// file is read once, by the one input reader.
bool UseCertificateChain(SSL_CTX* tls, const std::string& pem) {
  Bio bio = MemBio(pem);
  if (bio == nullptr) return false;
  X509* leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr) return false;
  const bool used = SSL_CTX_use_certificate(tls, leaf) == 1;
  X509_free(leaf);
  if (!used) return false;
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(tls, ca) != 1) {
      X509_free(ca);
      return false;
    }
  }
  ERR_clear_error();  // the end of the chain reads as "no start line"
  return true;
}

bool UsePrivateKey(SSL_CTX* tls, const std::string& pem) {
  Bio bio = MemBio(pem);
  if (bio == nullptr) return false;
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) return false;
  const bool used = SSL_CTX_use_PrivateKey(tls, key) == 1;
  EVP_PKEY_free(key);
  return used;
}

// True when the last OpenSSL failure was a key that is not the
// certificate's.
bool KeyMismatch() {
  return ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
}

absl::StatusOr<SSL_CTX*> LoadTls(const HttpServerOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        options.tls_cert.empty()
            ? "--metrics-tls-key needs --metrics-tls-cert: give both or "
              "neither"
            : "--metrics-tls-cert needs --metrics-tls-key: give both or "
              "neither");
  }
  // Both read before anything is made of them: a FIFO or a device there
  // is exit 2 at once, not a start that hangs.
  auto cert_pem =
      ReadInputFile("--metrics-tls-cert", options.tls_cert, kMaxPemBytes);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem =
      ReadInputFile("--metrics-tls-key", options.tls_key, kMaxPemBytes);
  if (!key_pem.ok()) return key_pem.status();
  SSL_CTX* tls = SSL_CTX_new(TLS_server_method());
  if (tls == nullptr) {
    return absl::InternalError("--metrics-tls-cert: cannot create a context");
  }
  SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
  const std::string mismatch =
      absl::StrCat("--metrics-tls-key ", options.tls_key,
                   ": does not match the certificate in ", options.tls_cert);
  absl::Status status;
  ERR_clear_error();
  if (!UseCertificateChain(tls, *cert_pem)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("--metrics-tls-cert ", options.tls_cert,
                     ": cannot load the certificate: ", LoadError(),
                     "; give a PEM certificate (chain) file"));
  } else if (!UsePrivateKey(tls, *key_pem)) {
    status = absl::InvalidArgumentError(
        KeyMismatch() ? mismatch
                      : absl::StrCat("--metrics-tls-key ", options.tls_key,
                                     ": cannot load the key: ", LoadError(),
                                     "; give an unencrypted PEM private key"));
  } else if (SSL_CTX_check_private_key(tls) != 1) {
    status = absl::InvalidArgumentError(mismatch);
  }
  ERR_clear_error();
  if (!status.ok()) {
    SSL_CTX_free(tls);
    return status;
  }
  return tls;
}

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Service Unavailable";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& options, Metrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->metrics_ = metrics;
  http->answer_all_ = options.answer_all;
  http->max_connections_ = options.max_connections;
  if (!options.tls_cert.empty() || !options.tls_key.empty()) {
    auto tls = LoadTls(options);
    if (!tls.ok()) return tls.status();
    http->tls_ = *tls;
  }
  if (absl::Status listening = http->Listen(options); !listening.ok()) {
    return listening;
  }
  HttpServer* self = http.get();
  http->thread_ = std::thread([self] { event_base_dispatch(self->base_); });
  return http;
}

absl::Status HttpServer::Listen(const HttpServerOptions& options) {
  // Every address, IPv4 too (IPv4 alone in a pod without IPv6). A flood's
  // connections are accepted (and evicted) at once; a short backlog would
  // leave a probe's SYN behind them, retried after 1 s.
  absl::StatusOr<int> listening = ListenTcp("::", options.port, SOMAXCONN);
  if (!listening.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.port_flag, ": ", listening.status().message(),
                     "; give a free port, or 0 for none"));
  }
  const int fd = *listening;
  port_ = BoundPort(fd);
  base_ = event_base_new();
  http_ = base_ != nullptr ? evhttp_new(base_) : nullptr;
  evhttp_bound_socket* bound =
      http_ != nullptr ? evhttp_accept_socket_with_handle(http_, fd) : nullptr;
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (bound == nullptr || stop_fd_ < 0) {
    if (bound == nullptr) close(fd);
    return absl::InternalError(absl::StrCat(
        options.port_flag,
        ": cannot start the HTTP event loop: ", std::strerror(errno)));
  }
  stop_event_ = event_new(
      base_, stop_fd_, EV_READ,
      [](evutil_socket_t, short, void* base) {  // NOLINT(runtime/int)
        event_base_loopbreak(static_cast<event_base*>(base));
      },
      base_);
  event_add(stop_event_, nullptr);
  evhttp_set_max_headers_size(http_, kMaxHeaders);
  evhttp_set_max_body_size(http_, kMaxBody);
  // evhttp's timeout restarts on every byte; the deadline each tracked
  // connection gets (Track) does not, so a client dripping a byte at a
  // time cannot hold one of the max_connections for long.
  timeout_ = options.timeout;
  head_timeout_ = std::min(options.head_timeout, options.timeout);
  const timeval timeout = absl::ToTimeval(options.timeout);
  evhttp_set_timeout_tv(http_, &timeout);
  // Every method reaches Handle, which answers 405 where evhttp would say
  // 501 Not Implemented.
  evhttp_set_allowed_methods(
      http_, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                 EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                 EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
  evhttp_set_gencb(http_, &HttpServer::Handle, this);
  evhttp_set_bevcb(http_, &HttpServer::NewConnection, this);
  return absl::OkStatus();
}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  live_ = false;
  ready_ = false;
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) < 0) {
      // The eventfd cannot fill up with one write; nothing else to do.
    }
    thread_.join();
  }
  if (http_ != nullptr) evhttp_free(http_);
  // Connections the loop stopped before tracking: freed by evhttp_free
  // above, all but the reference NewConnection took.
  for (bufferevent* connection : tracking_) bufferevent_decref(connection);
  tracking_.clear();
  // Freed by the close callbacks evhttp_free ran; any left have no
  // connection any more.
  for (auto& entry : tracked_) {
    if (entry.second->timer != nullptr) event_free(entry.second->timer);
    delete entry.second;
  }
  tracked_.clear();
  order_.clear();
  if (stop_event_ != nullptr) event_free(stop_event_);
  if (base_ != nullptr) event_base_free(base_);
  if (tls_ != nullptr) SSL_CTX_free(tls_);
  if (stop_fd_ >= 0) close(stop_fd_);
  http_ = nullptr;
  stop_event_ = nullptr;
  base_ = nullptr;
  tls_ = nullptr;
  stop_fd_ = -1;
}

// evhttp says nothing when it closes a connection, and makes the
// connection only after this returns: on the loop's next turn (or the next
// accept, whichever comes first), the bufferevent's callback argument is
// that connection, whose close callback is then set. A reference keeps the
// bufferevent readable until then; a connection freed before it has had
// its callbacks cleared.
bufferevent* HttpServer::NewConnection(event_base* base, void* arg) {
  auto* self = static_cast<HttpServer*>(arg);
  // At the cap the oldest idle connection makes room: a flood of silent
  // connections keeps the newest (a probe's) and never stops accepting.
  self->TrackPending();
  if (self->connections_ >= self->max_connections_) self->EvictOldest();
  bufferevent* connection;
  if (self->tls_ != nullptr) {
    // Out of memory only: evhttp then makes a plain connection, which a
    // TLS client's handshake fails on.
    SSL* tls = SSL_new(self->tls_);
    if (tls == nullptr) return nullptr;
    connection = bufferevent_openssl_socket_new(
        base, -1, tls, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
  } else {
    connection = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  }
  if (connection == nullptr) return nullptr;
  bufferevent_incref(connection);
  const timeval now{0, 0};
  if (event_base_once(base, -1, EV_TIMEOUT, &HttpServer::Track, self, &now) !=
      0) {
    bufferevent_decref(connection);
    return connection;  // served, not counted
  }
  ++self->connections_;
  self->tracking_.push_back(connection);
  return connection;
}

void HttpServer::Track(int, short, void* arg) {  // NOLINT(runtime/int)
  static_cast<HttpServer*>(arg)->TrackPending();
}

void HttpServer::TrackPending() {
  std::vector<bufferevent*> tracking;
  tracking.swap(tracking_);
  for (bufferevent* connection : tracking) {
    void* evcon = nullptr;
    bufferevent_getcb(connection, nullptr, nullptr, nullptr, &evcon);
    if (evcon != nullptr) {
      auto* http_connection = static_cast<evhttp_connection*>(evcon);
      auto* tracked = new Tracked{this, http_connection, nullptr, {}, false};
      tracked->timer = evtimer_new(base_, &HttpServer::DeadlinePassed, tracked);
      tracked->position = order_.insert(order_.end(), tracked);
      tracked_[http_connection] = tracked;
      evhttp_connection_set_closecb(http_connection, &HttpServer::Closed,
                                    tracked);
      Arm(tracked, head_timeout_);
    } else {
      --connections_;
    }
    bufferevent_decref(connection);
  }
}

void HttpServer::EvictOldest() {
  if (order_.empty()) return;
  Tracked* victim = order_.front();
  for (Tracked* tracked : order_) {
    if (!tracked->answering) {
      victim = tracked;
      break;
    }
  }
  // Runs Closed, which frees `victim`.
  evhttp_connection_free(victim->connection);
}

void HttpServer::Arm(Tracked* tracked, absl::Duration deadline) {
  if (tracked->timer == nullptr) return;
  const timeval timeout = absl::ToTimeval(deadline);
  evtimer_add(tracked->timer, &timeout);
}

void HttpServer::DeadlinePassed(int, short, void* arg) {  // NOLINT
  // Runs Closed, which frees the tracking.
  evhttp_connection_free(static_cast<Tracked*>(arg)->connection);
}

void HttpServer::Closed(evhttp_connection* connection, void* arg) {
  auto* tracked = static_cast<Tracked*>(arg);
  HttpServer* self = tracked->server;
  self->tracked_.erase(connection);
  self->order_.erase(tracked->position);
  if (tracked->timer != nullptr) event_free(tracked->timer);
  delete tracked;
  --self->connections_;
}

// The answer is sent: the connection is idle (keep-alive) and has the head
// deadline for its next request.
void HttpServer::Answered(evhttp_request*, void* arg) {
  auto* tracked = static_cast<Tracked*>(arg);
  tracked->answering = false;
  tracked->server->Arm(tracked, tracked->server->head_timeout_);
}

void HttpServer::Handle(evhttp_request* request, void* arg) {
  auto* self = static_cast<HttpServer*>(arg);
  // A complete request: the answer gets a deadline of its own, and the
  // connection is the last to be evicted until it is sent.
  self->TrackPending();
  auto tracked = self->tracked_.find(evhttp_request_get_connection(request));
  if (tracked != self->tracked_.end()) {
    Tracked* t = tracked->second;
    t->answering = true;
    self->order_.splice(self->order_.end(), self->order_, t->position);
    self->Arm(t, self->timeout_);
    evhttp_request_set_on_complete_cb(request, &HttpServer::Answered, t);
  }
  const evhttp_cmd_type method = evhttp_request_get_command(request);
  const std::string uri = evhttp_request_get_uri(request);
  const std::string path = uri.substr(0, uri.find('?'));
  int code = 404;
  std::string content_type = "text/plain";
  std::string body = "not found: try /metrics, /healthz, /readyz\n";
  if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
    code = 405;
    body = "only GET and HEAD\n";
  } else if (self->answer_all_) {
    HttpAnswer answer = self->answer_all_();
    code = answer.code;
    body = std::move(answer.body);
  } else if (path == "/metrics") {
    code = 200;
    content_type = "text/plain; version=0.0.4; charset=utf-8";
    body = self->metrics_->Render();
  } else if (path == "/healthz" || path == "/readyz") {
    const bool ok =
        path == "/healthz" ? self->live_.load() : self->ready_.load();
    code = ok ? 200 : 503;
    body = ok ? "ok\n" : (path == "/healthz" ? "not live\n" : "not ready\n");
  }
  evkeyvalq* headers = evhttp_request_get_output_headers(request);
  evhttp_add_header(headers, "Content-Type", content_type.c_str());
  evbuffer* out = evbuffer_new();
  if (out == nullptr) {
    evhttp_send_error(request, 503, nullptr);
    return;
  }
  if (method == EVHTTP_REQ_HEAD) {
    // evhttp would send a HEAD answer's body; the length alone says it.
    evhttp_add_header(headers, "Content-Length",
                      std::to_string(body.size()).c_str());
  } else {
    evbuffer_add(out, body.data(), body.size());
  }
  evhttp_send_reply(request, code, Reason(code), out);
  evbuffer_free(out);
}

}  // namespace distjob
