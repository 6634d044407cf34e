#include "supervisor/worker_server_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

// A one-connection server on a Unix socket that reads the request and
// answers `answer` (nothing when empty: a hung worker), then closes.
class FakeWorkerServer {
 public:
  explicit FakeWorkerServer(std::string answer) : answer_(std::move(answer)) {
    char dir[] = "/tmp/wsc_testXXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/w.sock";
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeWorkerServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }
  const std::string& request() const { return request_; }

 private:
  void Serve() {
    const int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    const ssize_t n = read(c, buf, sizeof(buf));
    if (n > 0) request_.assign(buf, static_cast<size_t>(n));
    if (!answer_.empty()) {
      (void)!write(c, answer_.data(), answer_.size());
    } else {
      // Hung: hold the connection until the client gives up.
      (void)!read(c, buf, sizeof(buf));
    }
    close(c);
  }

  std::string answer_;
  std::string dir_, path_, request_;
  int fd_ = -1;
  std::thread thread_;
};

TEST(WorkerServerClientTest, PostsToTheHandlerAndReadsTheBody) {
  FakeWorkerServer server(
      "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
  auto answer = AskWorkerServer(server.path(), "fr_trace_json",
                                absl::Now() + absl::Seconds(5), 1024);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "{\"a\":1}");
  EXPECT_FALSE(answer->truncated);
  EXPECT_EQ(
      server.request().rfind("POST /handler/fr_trace_json HTTP/1.1\r\n", 0), 0u)
      << server.request();
}

TEST(WorkerServerClientTest, ALongBodyIsCutAtTheBound) {
  FakeWorkerServer server("HTTP/1.1 200 OK\r\n\r\n" + std::string(5000, 'x'));
  auto answer = AskWorkerServer(server.path(), "wait_counter_values",
                                absl::Now() + absl::Seconds(5), 100);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->body, std::string(100, 'x'));
  EXPECT_TRUE(answer->truncated);
}

TEST(WorkerServerClientTest, AHungServerCostsAtMostTheDeadline) {
  FakeWorkerServer server("");
  const absl::Time start = absl::Now();
  auto answer = AskWorkerServer(server.path(), "fr_trace_json",
                                start + absl::Milliseconds(300), 1024);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(answer.status().message().find(server.path()), std::string::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(WorkerServerClientTest, NoServerIsUnavailable) {
  auto answer = AskWorkerServer("/nonexistent/w.sock", "ping",
                                absl::Now() + absl::Seconds(1), 1024);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable);
}

TEST(WorkerServerClientTest, AnAnswerThatIsNotHttpIsRefused) {
  FakeWorkerServer server("hello there\r\n\r\n");
  auto answer = AskWorkerServer(server.path(), "ping",
                                absl::Now() + absl::Seconds(5), 1024);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distjob
