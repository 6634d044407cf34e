#include "rendezvous/store/server/conn_limiter.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/loopback_testing.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

// Stands in for gRPC: keeps the fds it is handed until told to end them.
class Handed {
 public:
  ConnLimiter::Handoff Fn() {
    return [this](int fd) {
      absl::MutexLock lock(&mu_);
      fds_.push_back(fd);
    };
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return fds_.size();
  }
  // As gRPC ends a connection (idle, keepalive, shutdown): shutdown(2),
  // then close.
  void EndAll() {
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) {
      shutdown(fd, SHUT_RDWR);
      close(fd);
    }
    fds_.clear();
  }
  ~Handed() { EndAll(); }

 private:
  absl::Mutex mu_;
  std::vector<int> fds_;
};

bool WaitFor(const std::function<bool()>& done,
             absl::Duration within = absl::Seconds(10)) {
  const absl::Time until = absl::Now() + within;
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Everything the server sends until it closes (bounded by a deadline).
std::string ReadToEnd(int fd, absl::Duration within = absl::Seconds(10)) {
  std::string out;
  const absl::Time until = absl::Now() + within;
  while (absl::Now() < until) {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool ClosedByServer(int fd) {
  return WaitFor([&] {
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
  });
}

std::unique_ptr<ConnLimiter> Start(ConnLimits limits, Handed* handed,
                                   bool tls = false) {
  auto l = ConnLimiter::Listen("127.0.0.1", 0, limits, tls);
  EXPECT_TRUE(l.ok()) << l.status();
  (*l)->Start(handed->Fn());
  return std::move(*l);
}

TEST(ConnLimiterTest, CapsOnePeerAndCountsDropWhenConnectionsEnd) {
  Handed handed;
  ConnLimits limits;
  limits.max_conns_per_peer = 4;
  auto l = Start(limits, &handed);
  std::vector<int> clients;
  for (int i = 0; i < 10; ++i) {
    clients.push_back(ConnectLoopback(l->port()));
    Send(clients.back(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  }
  ASSERT_TRUE(WaitFor([&] { return l->Stats().refused == 6; }))
      << l->Stats().refused;
  EXPECT_EQ(l->Stats().open, 4);
  ASSERT_TRUE(WaitFor([&] { return handed.size() == 4; }));
  // The handler (gRPC) ends its connections: the counts return to 0.
  handed.EndAll();
  ASSERT_TRUE(WaitFor([&] { return l->Stats().open == 0; })) << l->Stats().open;
  // So do connections the client ends.
  const int again = ConnectLoopback(l->port());
  Send(again, "PRI");
  ASSERT_TRUE(WaitFor([&] { return handed.size() == 1; }));
  EXPECT_EQ(l->Stats().open, 1);
  close(again);
  EXPECT_TRUE(WaitFor([&] { return l->Stats().open == 0; }));
  for (int fd : clients) close(fd);
}

TEST(ConnLimiterTest, ANewAddressEvictsTheOldestOfTheBiggestAtTheCap) {
  Handed handed;
  ConnLimits limits;
  limits.max_conns = 4;
  limits.max_conns_per_peer = 4;
  auto l = Start(limits, &handed);
  std::vector<int> flood;
  for (int i = 0; i < 4; ++i) {
    flood.push_back(ConnectLoopback(l->port(), "127.0.0.2"));
    Send(flood.back(), "PRI");
  }
  ASSERT_TRUE(WaitFor([&] { return handed.size() == 4; }));
  // The same address gets no more...
  const int more = ConnectLoopback(l->port(), "127.0.0.2");
  EXPECT_TRUE(ClosedByServer(more));
  EXPECT_EQ(l->Stats().refused, 1);
  // ...a member elsewhere gets in, in place of the flood's oldest.
  const int member = ConnectLoopback(l->port(), "127.0.0.1");
  Send(member, "PRI");
  ASSERT_TRUE(WaitFor([&] { return handed.size() == 5; }));
  EXPECT_EQ(l->Stats().evicted, 1);
  EXPECT_EQ(l->Stats().open, 4);
  EXPECT_TRUE(ClosedByServer(flood[0]));
  close(more);
  close(member);
  for (int fd : flood) close(fd);
}

TEST(ConnLimiterTest, ASilentConnectionIsClosedAtItsDeadline) {
  Handed handed;
  ConnLimits limits;
  limits.first_bytes_timeout = absl::Milliseconds(200);
  auto l = Start(limits, &handed);
  const int silent = ConnectLoopback(l->port());
  EXPECT_TRUE(ClosedByServer(silent));
  EXPECT_TRUE(WaitFor([&] { return l->Stats().open == 0; }));
  EXPECT_EQ(handed.size(), 0u);
  close(silent);
}

TEST(ConnLimiterTest, APlaintextClientOfATlsStoreGetsAGrpcErrorSayingSo) {
  Handed handed;
  auto l = Start({}, &handed, /*tls=*/true);
  const int c = ConnectLoopback(l->port());
  // The preface, an empty SETTINGS, then HEADERS on stream 1 (contents
  // are not read).
  std::string hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  hello += std::string("\0\0\0\x04\0\0\0\0\0", 9);
  hello += std::string("\0\0\x01\x01\x04\0\0\0\x01", 9) + "x";
  Send(c, hello);
  const std::string answer = ReadToEnd(c);
  EXPECT_NE(answer.find(kStoreSpeaksTls), std::string::npos) << answer;
  EXPECT_NE(answer.find("grpc-status"), std::string::npos);
  EXPECT_NE(answer.find("--rdzv-tls-cert"), std::string::npos);
  EXPECT_EQ(l->Stats().protocol_mismatch, 1);
  EXPECT_EQ(handed.size(), 0u);
  EXPECT_TRUE(WaitFor([&] { return l->Stats().open == 0; }));
  close(c);
}

TEST(ConnLimiterTest, ATlsClientOfAPlaintextStoreIsAnsweredInPlaintext) {
  Handed handed;
  auto l = Start({}, &handed, /*tls=*/false);
  const int c = ConnectLoopback(l->port());
  Send(c, std::string("\x16\x03\x01\x00\x05hello", 10));
  const std::string answer = ReadToEnd(c);
  EXPECT_EQ(answer.rfind(kStoreSpeaksPlaintext, 0), 0u) << answer;
  EXPECT_EQ(l->Stats().protocol_mismatch, 1);
  EXPECT_EQ(handed.size(), 0u);
  close(c);
}

TEST(ConnLimiterTest, StopReturnsPromptlyWithConnectionsOpen) {
  Handed handed;
  auto l = Start({}, &handed);
  const int silent = ConnectLoopback(l->port());
  const absl::Time t0 = absl::Now();
  l->Stop();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
  EXPECT_TRUE(ClosedByServer(silent));
  close(silent);
}

TEST(ConnLimiterTest, ATakenPortIsUnavailable) {
  Handed handed;
  auto first = Start({}, &handed);
  auto second = ConnLimiter::Listen("127.0.0.1", first->port(), {}, false);
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_TRUE(absl::IsInvalidArgument(
      ConnLimiter::Listen("store.example", 0, {}, false).status()));
}

}  // namespace
}  // namespace distjob
