#include "agent/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace distjob {
namespace {

// A request is its head only (GET, HEAD): larger is not a scrape or probe.
constexpr size_t kMaxRequest = 8192;
// A client that does not finish its request, or read the answer, in this
// long is dropped: probes and scrapes are answered one at a time.
constexpr absl::Duration kRequestTimeout = absl::Seconds(2);

// A socket listening on `port` of every address of `family`.
int Listen(int family, int port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int yes = 1, no = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  int bound;
  if (family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<uint16_t>(port));
    bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  if (bound != 0 || listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    return 0;
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

// Waits for `events` on `fd` or a stop; false on stop or `deadline`.
bool WaitFor(int fd, int16_t events, int stop_fd, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int ready =
        poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (fds[1].revents & POLLIN) != 0) return false;
    if (ready > 0) return true;
  }
}

std::string Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 503:
      return "Service Unavailable";
    default:
      return "Bad Request";
  }
}

std::string Response(int code, const std::string& content_type,
                     const std::string& body, bool head) {
  return absl::StrCat("HTTP/1.1 ", code, " ", Reason(code),
                      "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n", head ? "" : body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    int port, Metrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->metrics_ = metrics;
  http->listen_fd_ = Listen(AF_INET6, port);
  // EAFNOSUPPORT: no IPv6 in this pod; IPv4 alone.
  if (http->listen_fd_ < 0 && errno == EAFNOSUPPORT) {
    http->listen_fd_ = Listen(AF_INET, port);
  }
  if (http->listen_fd_ < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-port: cannot listen on port ", port, ": ",
        std::strerror(errno), "; give a free port, or 0 for none"));
  }
  http->port_ = BoundPort(http->listen_fd_);
  http->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (http->stop_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("--metrics-port: eventfd: ", std::strerror(errno)));
  }
  HttpServer* self = http.get();
  http->thread_ = std::thread([self] { self->Serve(); });
  return http;
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
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  listen_fd_ = stop_fd_ = -1;
}

void HttpServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;
    const int connection =
        accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (connection < 0) continue;
    Answer(connection);
    close(connection);
  }
}

void HttpServer::Answer(int connection) {
  const absl::Time deadline = absl::Now() + kRequestTimeout;
  std::string request;
  char buffer[2048];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequest ||
        !WaitFor(connection, POLLIN, stop_fd_, deadline)) {
      return;
    }
    const ssize_t n = read(connection, buffer, sizeof(buffer));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  // "GET /metrics?x HTTP/1.1": the method, and the path without a query.
  const std::string first = request.substr(0, request.find("\r\n"));
  const size_t method_end = first.find(' ');
  const size_t path_end = first.find(' ', method_end + 1);
  std::string response;
  if (method_end == std::string::npos || path_end == std::string::npos) {
    response = Response(400, "text/plain", "bad request\n", false);
  } else {
    std::string path = first.substr(method_end + 1, path_end - method_end - 1);
    response =
        Respond(first.substr(0, method_end), path.substr(0, path.find('?')));
  }
  size_t sent = 0;
  while (sent < response.size()) {
    if (!WaitFor(connection, POLLOUT, stop_fd_, deadline)) return;
    const ssize_t n = send(connection, response.data() + sent,
                           response.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string HttpServer::Respond(const std::string& method,
                                const std::string& path) {
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    return Response(405, "text/plain", "only GET and HEAD\n", false);
  }
  if (path == "/metrics") {
    return Response(200, "text/plain; version=0.0.4; charset=utf-8",
                    metrics_->Render(), head);
  }
  if (path == "/healthz" || path == "/readyz") {
    const bool ok = path == "/healthz" ? live_.load() : ready_.load();
    return Response(
        ok ? 200 : 503, "text/plain",
        ok ? "ok\n" : (path == "/healthz" ? "not live\n" : "not ready\n"),
        head);
  }
  return Response(404, "text/plain",
                  "not found: try /metrics, /healthz, "
                  "/readyz\n",
                  head);
}

}  // namespace distjob
