#include "observability/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A connected TCP client of the loopback address of `family`; -1 when that
// family has no loopback here.
int Connect(int family, int port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int connected;
  if (family == AF_INET6) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_loopback;
    address.sin6_port = htons(static_cast<uint16_t>(port));
    connected =
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    connected =
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  if (connected != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// What the server sends on `fd` until it closes it or `within` passes;
// `*closed` (when given) says whether the server closed it.
std::string Read(int fd, absl::Duration within, bool* closed = nullptr) {
  const absl::Time deadline = absl::Now() + within;
  std::string got;
  char buffer[4096];
  if (closed != nullptr) *closed = false;
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return got;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // End of file, or a reset where the server closed with bytes unread.
      if (closed != nullptr) *closed = n == 0 || errno == ECONNRESET;
      return got;
    }
    got.append(buffer, static_cast<size_t>(n));
  }
}

std::string Get(int family, int port, const std::string& request) {
  const int fd = Connect(family, port);
  if (fd < 0) return "no connection";
  Send(fd, request);
  std::string answer = Read(fd, absl::Seconds(10));
  close(fd);
  return answer;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions options) {
    metrics_.SetJobLabels("j", "r", 0);
    auto server = HttpServer::Start(options, &metrics_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  Metrics metrics_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnswersOverIpv4AndIpv6OnOnePort) {
  Start({});
  const std::string get =
      "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (int family : {AF_INET, AF_INET6}) {
    const std::string answer = Get(family, server_->port(), get);
    if (family == AF_INET6 && answer == "no connection") continue;
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
    EXPECT_THAT(answer, HasSubstr("text/plain; version=0.0.4"));
    EXPECT_THAT(answer, HasSubstr("distjob_attempt{job_name=\"j\""));
  }
}

TEST_F(HttpServerTest, ProbesMethodsAndUnknownPaths) {
  Start({});
  const int port = server_->port();
  auto get = [port](const std::string& method, const std::string& path) {
    return Get(AF_INET, port,
               method + " " + path + " HTTP/1.0\r\nHost: x\r\n\r\n");
  };
  EXPECT_THAT(get("GET", "/healthz"), StartsWith("HTTP/1.0 200"));
  EXPECT_THAT(get("GET", "/readyz"), StartsWith("HTTP/1.0 503"));
  server_->SetReady(true);
  EXPECT_THAT(get("GET", "/readyz"), StartsWith("HTTP/1.0 200"));
  EXPECT_THAT(get("GET", "/nope"), StartsWith("HTTP/1.0 404"));
  EXPECT_THAT(get("POST", "/metrics"), StartsWith("HTTP/1.0 405"));
  const std::string head = get("HEAD", "/metrics");
  EXPECT_THAT(head, StartsWith("HTTP/1.0 200"));
  EXPECT_THAT(head, Not(HasSubstr("distjob_attempt")));
  EXPECT_THAT(head, HasSubstr("Content-Length: "));
  // A request head over the bound is refused, not buffered.
  EXPECT_THAT(get("GET", "/metrics?" + std::string(10000, 'x')),
              Not(StartsWith("HTTP/1.0 200")));
}

// Silent connections at the cap must not starve a probe: the oldest idle
// one makes room for the newest.
TEST_F(HttpServerTest, ConnectionsOverTheCapEvictTheOldestIdle) {
  HttpServerOptions options;
  options.max_connections = 2;
  options.head_timeout = absl::Seconds(30);
  options.timeout = absl::Seconds(30);
  Start(options);
  const int port = server_->port();
  const int first = Connect(AF_INET, port);
  ASSERT_GE(first, 0);
  Send(first, "GET /heal");
  // Accepted before `second` (its head is half there).
  bool closed = false;
  EXPECT_EQ(Read(first, absl::Milliseconds(200), &closed), "");
  const int second = Connect(AF_INET, port);
  ASSERT_GE(second, 0);
  Send(second, "GET /heal");
  EXPECT_EQ(Read(second, absl::Milliseconds(200), &closed), "");
  const int third = Connect(AF_INET, port);
  ASSERT_GE(third, 0);
  Send(third, "GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_THAT(Read(third, absl::Seconds(10)), StartsWith("HTTP/1.0 200"));
  EXPECT_EQ(Read(first, absl::Seconds(10), &closed), "");
  EXPECT_TRUE(closed) << "the oldest idle connection was not evicted";
  Send(second, "thz HTTP/1.0\r\n\r\n");
  EXPECT_THAT(Read(second, absl::Seconds(10)), StartsWith("HTTP/1.0 200"));
  close(first);
  close(second);
  close(third);
}

TEST_F(HttpServerTest, ASilentClientIsClosedAtTheHeadTimeout) {
  HttpServerOptions options;
  options.head_timeout = absl::Milliseconds(300);
  options.timeout = absl::Seconds(30);
  Start(options);
  const int silent = Connect(AF_INET, server_->port());
  ASSERT_GE(silent, 0);
  const absl::Time start = absl::Now();
  bool closed = false;
  EXPECT_EQ(Read(silent, absl::Seconds(10), &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  close(silent);
}

TEST_F(HttpServerTest, ShutdownClosesStalledConnections) {
  Start({});
  const int stalled = Connect(AF_INET, server_->port());
  ASSERT_GE(stalled, 0);
  Send(stalled, "GET /metr");
  const absl::Time start = absl::Now();
  server_->Shutdown();
  // Closed by the server at once: EOF, no answer.
  bool closed = false;
  EXPECT_EQ(Read(stalled, absl::Seconds(10), &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  close(stalled);
  EXPECT_EQ(Connect(AF_INET, server_->port()), -1);
}

// evhttp's own timeout restarts on every byte: a client dripping its
// request head a byte at a time would hold a connection for hours.
TEST_F(HttpServerTest, ADrippingClientIsClosedAtTheTimeout) {
  HttpServerOptions options;
  options.timeout = absl::Milliseconds(800);
  options.head_timeout = options.timeout;
  Start(options);
  const int drip = Connect(AF_INET, server_->port());
  ASSERT_GE(drip, 0);
  const absl::Time start = absl::Now();
  Send(drip, "GET /metrics HTTP/1.1\r\nX-Drip: ");
  // A byte every 100 ms, each well inside the timeout, until the server
  // closes the connection (or it is plainly never closed).
  bool closed = false;
  while (!closed && absl::Now() - start < absl::Seconds(10)) {
    if (send(drip, "a", 1, MSG_NOSIGNAL) != 1) {
      closed = true;  // reset by the server
      break;
    }
    Read(drip, absl::Milliseconds(100), &closed);
  }
  const absl::Duration held = absl::Now() - start;
  close(drip);
  EXPECT_TRUE(closed);
  EXPECT_LT(held, options.timeout + absl::Seconds(1));
  // A complete request on a new connection is still answered.
  EXPECT_THAT(Get(AF_INET, server_->port(), "GET /healthz HTTP/1.0\r\n\r\n"),
              StartsWith("HTTP/1.0 200"));
}

TEST(HttpServerTlsTest, FilesThatDoNotLoadNameTheFlagAndFile) {
  Metrics metrics;
  HttpServerOptions options;
  options.tls_cert = "/nonexistent/cert.pem";
  options.tls_key = "/nonexistent/key.pem";
  auto server = HttpServer::Start(options, &metrics);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(),
              HasSubstr("--metrics-tls-cert '/nonexistent/cert.pem': cannot "
                        "open: No such file or directory"));
  options.tls_cert = "";
  server = HttpServer::Start(options, &metrics);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(),
              HasSubstr("--metrics-tls-key needs --metrics-tls-cert"));
}

}  // namespace
}  // namespace distjob
