#include "workerstore/tcpstore_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/loopback_testing.h"
#include "common/thread_state_testing.h"
#include "gtest/gtest.h"
#include "workerstore/tcpstore_protocol.h"

namespace distjob {
namespace {

using tcpstore::Dialect;
using tcpstore::Op;

// Frames built with the protocol's own encoders (tcpstore_protocol.h).
std::string U64(uint64_t v) {
  std::string out;
  tcpstore::AppendI64(&out, static_cast<int64_t>(v));
  return out;
}
std::string U32(uint32_t v) {
  std::string out;
  tcpstore::AppendU32(&out, v);
  return out;
}
std::string Str(const std::string& s) {
  std::string out;
  tcpstore::AppendBytes(&out, s);
  return out;
}
std::string Byte(uint8_t v) {
  std::string out;
  tcpstore::AppendU8(&out, v);
  return out;
}
// A 2.x client's query type (it opened with VALIDATE).
std::string Q(Op op) {
  return Byte(tcpstore::QueryType(Dialect::kValidated, op));
}
// A 1.13 client's.
std::string Legacy(Op op) {
  return Byte(tcpstore::QueryType(Dialect::kLegacy, op));
}
std::string Keys(std::initializer_list<std::string> keys) {
  std::string out = U64(keys.size());
  for (const auto& k : keys) out += Str(k);
  return out;
}
// A multi_get's key list naming `key` `n` times.
std::string RepeatedKeys(const std::string& key, int n) {
  std::string out = U64(static_cast<uint64_t>(n));
  for (int i = 0; i < n; ++i) out += Str(key);
  return out;
}
// Whether `server` has served at least `n` requests of `op` (its Stats
// name: "get", "multi_get", ...).
bool Served(TcpStoreServer& server, const std::string& op, int64_t n) {
  const auto s = server.Stats();
  auto it = s.requests.find(op);
  return it != s.requests.end() && it->second >= n;
}

// A raw client: what a TCPStore client sends, byte for byte.
class Client {
 public:
  // `from`: the loopback address to connect from (a peer of its own).
  explicit Client(int port, bool validate = true,
                  const char* from = "127.0.0.1") {
    fd_ = ConnectLoopback(port, from);
    if (validate) Send(Q(Op::kValidate) + U32(tcpstore::kValidateMagic));
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Exactly n bytes, or what came before the deadline or the close.
  std::string Recv(size_t n, absl::Duration timeout = absl::Seconds(10)) {
    std::string out;
    const absl::Time deadline = absl::Now() + timeout;
    while (out.size() < n) {
      pollfd p{fd_, POLLIN, 0};
      const int ms =
          static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (ms <= 0 || poll(&p, 1, ms) <= 0) break;
      char buf[4096];
      const ssize_t got = read(fd_, buf, std::min(sizeof(buf), n - out.size()));
      if (got <= 0) break;
      out.append(buf, static_cast<size_t>(got));
    }
    return out;
  }
  // Whether the server closed the connection within 10 s.
  bool Closed() {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      const ssize_t got = read(fd_, buf, sizeof(buf));
      if (got <= 0) return true;
    }
    return false;
  }
  std::string Bytes() {
    const std::string n = Recv(8);
    if (n.size() != 8) return "<none>";
    uint64_t len;
    std::memcpy(&len, n.data(), 8);
    return Recv(len);
  }
  int64_t Int() {
    const std::string n = Recv(8);
    int64_t v = -999;
    if (n.size() == 8) std::memcpy(&v, n.data(), 8);
    return v;
  }

 private:
  int fd_ = -1;
};

// The scheduler's state of the server's loop thread.
char LoopState() { return ThreadState("tcpstore-loop"); }

std::unique_ptr<TcpStoreServer> StartServer(TcpStoreServerOptions o = {}) {
  o.host = "127.0.0.1";
  auto s = TcpStoreServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

TEST(TcpStoreServerTest, ServesEveryOperationOfA2xClient) {
  auto server = StartServer();
  Client c(server->port());
  c.Send(Q(Op::kPing) + U32(1234));
  EXPECT_EQ(c.Recv(4), U32(1234));
  c.Send(Q(Op::kSet) + Str("/a") + Str("1"));
  c.Send(Q(Op::kGet) + Str("/a"));
  EXPECT_EQ(c.Bytes(), "1");
  c.Send(Q(Op::kAdd) + Str("/a") + U64(41));
  EXPECT_EQ(c.Int(), 42);
  c.Send(Q(Op::kAdd) + Str("/n") + U64(static_cast<uint64_t>(-2)));
  EXPECT_EQ(c.Int(), -2);
  // compare_set: swaps on a match, answers the current value otherwise,
  // and the expected value for a missing key ("lying", as TCPStore).
  c.Send(Q(Op::kCompareSet) + Str("/a") + Str("42") + Str("x"));
  EXPECT_EQ(c.Bytes(), "x");
  c.Send(Q(Op::kCompareSet) + Str("/a") + Str("nope") + Str("y"));
  EXPECT_EQ(c.Bytes(), "x");
  c.Send(Q(Op::kCompareSet) + Str("/missing") + Str("e") + Str("d"));
  EXPECT_EQ(c.Bytes(), "e");
  c.Send(Q(Op::kCompareSet) + Str("/new") + Str("") + Str("d"));
  EXPECT_EQ(c.Bytes(), "d");
  c.Send(Q(Op::kCheck) + Keys({"/a", "/new"}));
  EXPECT_EQ(c.Recv(1), Byte(tcpstore::kReady));
  c.Send(Q(Op::kCheck) + Keys({"/a", "/missing"}));
  EXPECT_EQ(c.Recv(1), Byte(tcpstore::kNotReady));
  c.Send(Q(Op::kMultiSet) + U64(2) + Str("/m1") + Str("v1") + Str("/m2") +
         Str("v2"));
  c.Send(Q(Op::kMultiGet) + Keys({"/m2", "/m1"}));
  EXPECT_EQ(c.Bytes(), "v2");
  EXPECT_EQ(c.Bytes(), "v1");
  c.Send(Q(Op::kAppend) + Str("/ap") + Str("ab"));
  c.Send(Q(Op::kAppend) + Str("/ap") + Str("cd"));
  c.Send(Q(Op::kGet) + Str("/ap"));
  EXPECT_EQ(c.Bytes(), "abcd");
  c.Send(Q(Op::kNumKeys));
  EXPECT_EQ(c.Int(), 6);  // a n new m1 m2 ap
  c.Send(Q(Op::kDeleteKey) + Str("/ap"));
  EXPECT_EQ(c.Int(), 1);
  c.Send(Q(Op::kDeleteKey) + Str("/ap"));
  EXPECT_EQ(c.Int(), 0);
  c.Send(Q(Op::kQueuePush) + Str("/q") + Str("i1"));
  c.Send(Q(Op::kQueuePush) + Str("/q") + Str("i2"));
  c.Send(Q(Op::kQueueLen) + Str("/q"));
  EXPECT_EQ(c.Int(), 2);
  c.Send(Q(Op::kQueuePop) + Str("/q"));
  EXPECT_EQ(c.Int(), 2);
  EXPECT_EQ(c.Bytes(), "i1");
  c.Send(Q(Op::kQueuePop) + Str("/q"));
  EXPECT_EQ(c.Int(), 1);
  EXPECT_EQ(c.Bytes(), "i2");
  c.Send(Q(Op::kQueuePop) + Str("/q"));
  EXPECT_EQ(c.Int(), 0);
  c.Send(Q(Op::kListKeys));
  EXPECT_EQ(c.Int(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_NE(c.Bytes(), "<none>");
  const TcpStoreStats stats = server->Stats();
  EXPECT_EQ(stats.keys, 5);
  EXPECT_GT(stats.bytes, 5 * static_cast<int64_t>(kTcpStoreKeyBytes));
  EXPECT_EQ(stats.clients, 1);
  EXPECT_EQ(stats.requests.at("compare_set"), 4);
  EXPECT_EQ(stats.requests.at("validate"), 1);
  EXPECT_EQ(stats.protocol_errors, 0);
}

TEST(TcpStoreServerTest, Serves113Numbering) {
  auto server = StartServer();
  Client c(server->port(), /*validate=*/false);
  c.Send(Legacy(Op::kSet) + Str("/k") + Str("v"));
  c.Send(Legacy(Op::kGet) + Str("/k"));
  EXPECT_EQ(c.Bytes(), "v");
  c.Send(Legacy(Op::kNumKeys));
  EXPECT_EQ(c.Int(), 1);
  c.Send(Legacy(Op::kDeleteKey) + Str("/k"));
  EXPECT_EQ(c.Int(), 1);
}

// A 2.1 client sends no VALIDATE and numbers without WATCH_KEY; its
// CANCEL_WAIT (11) tells it apart, and its DELETE_KEY (7) and APPEND (8)
// are read as such from then on.
TEST(TcpStoreServerTest, Serves21Numbering) {
  auto server = StartServer();
  Client c(server->port(), /*validate=*/false);
  c.Send(Byte(3) + Str("/init") + U64(1));  // ADD, as waitForWorkers
  EXPECT_EQ(c.Int(), 1);
  c.Send(Byte(5) + Keys({"/never"}));  // WAIT, then its timeout's cancel
  c.Send(Byte(11));                    // CANCEL_WAIT
  EXPECT_EQ(c.Recv(1), Byte(tcpstore::kWaitCanceled));
  c.Send(Byte(10) + U64(2) + Str("/m1") + Str("v1") + Str("/m2") + Str("v2"));
  c.Send(Byte(9) + Keys({"/m1", "/m2"}));  // MULTI_GET
  EXPECT_EQ(c.Bytes(), "v1");
  EXPECT_EQ(c.Bytes(), "v2");
  c.Send(Byte(8) + Str("/m1") + Str("+"));  // APPEND
  c.Send(Byte(2) + Str("/m1"));
  EXPECT_EQ(c.Bytes(), "v1+");
  c.Send(Byte(7) + Str("/m2"));  // DELETE_KEY
  EXPECT_EQ(c.Int(), 1);
  EXPECT_EQ(server->Stats().protocol_errors, 0);
}

// One small multi_get naming a large value many times would queue far
// more than max_pending_output_bytes: it closes the connection instead, and
// the server serves on.
TEST(TcpStoreServerTest, AnAnswerOverThePendingOutputBoundClosesTheClient) {
  TcpStoreServerOptions o;
  o.max_pending_output_bytes = 64 << 10;
  auto server = StartServer(o);
  Client writer(server->port());
  writer.Send(Q(Op::kSet) + Str("/big") + Str(std::string(20 << 10, 'x')));
  writer.Send(Q(Op::kGet) + Str("/big"));
  EXPECT_EQ(writer.Bytes().size(), size_t{20} << 10);
  Client reader(server->port());
  reader.Send(Q(Op::kMultiGet) + Keys({"/big", "/big", "/big", "/big"}));
  EXPECT_TRUE(reader.Closed());
  EXPECT_EQ(server->Stats().protocol_errors, 1);
  Client again(server->port());
  again.Send(Q(Op::kMultiGet) + Keys({"/big", "/big"}));
  EXPECT_EQ(again.Bytes().size(), size_t{20} << 10);
  EXPECT_EQ(again.Bytes().size(), size_t{20} << 10);
}

// A new round's group finds none of the last group's keys on the same
// port, the last group's connections and parked waits are gone, and the
// store serves on.
TEST(TcpStoreServerTest, ClearDropsEveryKeyAndTheLastGroupsConnections) {
  auto server = StartServer();
  Client c(server->port(), /*validate=*/false);
  Client waiter(server->port(), /*validate=*/false);
  c.Send(Legacy(Op::kSet) + Str("/init") + Str("4"));
  c.Send(Legacy(Op::kAdd) + Str("/count") + U64(4));
  EXPECT_EQ(c.Int(), 4);
  waiter.Send(Legacy(Op::kWait) + Keys({"/never"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  ASSERT_TRUE(server->Clear().ok());
  EXPECT_EQ(server->Stats().keys, 0);
  EXPECT_EQ(server->Stats().bytes, 0);
  EXPECT_EQ(server->Stats().parked_waits, 0);
  EXPECT_EQ(server->Stats().clients, 0);
  EXPECT_TRUE(c.Closed());
  EXPECT_TRUE(waiter.Closed());
  Client next(server->port(), /*validate=*/false);
  next.Send(Legacy(Op::kNumKeys));
  EXPECT_EQ(next.Int(), 0);
  next.Send(Legacy(Op::kAdd) + Str("/count") + U64(6));  // from 0 again
  EXPECT_EQ(next.Int(), 6);
  // The loop's wake-up is drained: a second one works.
  ASSERT_TRUE(server->Clear().ok());
  EXPECT_TRUE(next.Closed());
  Client last(server->port(), /*validate=*/false);
  last.Send(Legacy(Op::kNumKeys));
  EXPECT_EQ(last.Int(), 0);
}

// A loop that does not come to a clear in time (here: asleep in a long
// stream pause) makes Clear() say so rather than return as if done; the
// clear still happens when the loop comes to it.
TEST(TcpStoreServerTest, AClearTheLoopDoesNotComeToInTimeIsAnError) {
  TcpStoreServerOptions o;
  o.set_stream_pause = absl::Seconds(2);
  o.clear_timeout = absl::Milliseconds(100);
  // No poll: an empty poll between the two batches would end the stream.
  o.busy_poll = absl::ZeroDuration();
  auto server = StartServer(o);
  Client c(server->port());
  auto sets = [&] {
    const auto r = server->Stats().requests;
    return r.count("set") ? r.at("set") : int64_t{0};
  };
  // Two batches of one unanswered set each: the loop then pauses.
  for (int i = 0; i < 2; ++i) {
    c.Send(Q(Op::kSet) + Str("/k") + Str("x"));
    ASSERT_TRUE(WaitFor([&] { return sets() == i + 1; }));
  }
  ASSERT_TRUE(WaitFor([&] { return server->Stats().stream_pauses == 1; }));
  const absl::Status cleared = server->Clear();
  EXPECT_EQ(cleared.code(), absl::StatusCode::kDeadlineExceeded) << cleared;
  EXPECT_TRUE(absl::StrContains(cleared.message(), "did not clear"));
  EXPECT_TRUE(WaitFor([&] {
    const TcpStoreStats st = server->Stats();
    return st.keys == 0 && st.clients == 0;
  }));
  EXPECT_TRUE(c.Closed());
}

TEST(TcpStoreServerTest, WaitAnswersOnceEveryKeyExistsAndCancelWaitEndsIt) {
  auto server = StartServer();
  Client waiter(server->port()), writer(server->port());
  waiter.Send(Q(Op::kWait) + Keys({"/a", "/b"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  writer.Send(Q(Op::kSet) + Str("/a") + Str("1"));
  // The ping's answer comes first: the wait still misses /b.
  waiter.Send(Q(Op::kPing) + U32(7));
  EXPECT_EQ(waiter.Recv(4), U32(7));
  writer.Send(Q(Op::kAdd) + Str("/b") + U64(1));
  EXPECT_EQ(writer.Int(), 1);
  EXPECT_EQ(waiter.Recv(1), Byte(tcpstore::kStopWaiting));
  EXPECT_EQ(server->Stats().parked_waits, 0);
  // A wait on keys that exist is answered at once.
  waiter.Send(Q(Op::kWait) + Keys({"/a"}));
  EXPECT_EQ(waiter.Recv(1), Byte(tcpstore::kStopWaiting));
  // The client's timeout: CANCEL_WAIT ends the wait.
  waiter.Send(Q(Op::kWait) + Keys({"/never"}));
  waiter.Send(Q(Op::kCancelWait));
  EXPECT_EQ(waiter.Recv(1), Byte(tcpstore::kWaitCanceled));
  EXPECT_EQ(server->Stats().parked_waits, 0);
  writer.Send(Q(Op::kSet) + Str("/never") + Str("x"));
  writer.Send(Q(Op::kPing) + U32(1));
  EXPECT_EQ(writer.Recv(4), U32(1));
  // Nothing more for the waiter: its next answer is its ping's.
  waiter.Send(Q(Op::kPing) + U32(9));
  EXPECT_EQ(waiter.Recv(4), U32(9));
}

// A wait on a queue and a key: the item that came first counts (the
// blocking queue_pop that the waiter makes next may find it popped, as
// with any wait on a queue).
TEST(TcpStoreServerTest, AWaitOnAQueueAndAKeyIsAnsweredWhenBothHaveCome) {
  auto server = StartServer();
  Client waiter(server->port()), writer(server->port());
  waiter.Send(Q(Op::kWait) + Keys({"/q", "/a"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  writer.Send(Q(Op::kQueuePush) + Str("/q") + Str("i1"));
  writer.Send(Q(Op::kPing) + U32(1));
  ASSERT_EQ(writer.Recv(4), U32(1));
  EXPECT_EQ(server->Stats().parked_waits, 1);  // /a is still missing
  writer.Send(Q(Op::kSet) + Str("/a") + Str("1"));
  EXPECT_EQ(waiter.Recv(1), Byte(tcpstore::kStopWaiting));
  EXPECT_EQ(server->Stats().parked_waits, 0);
}

TEST(TcpStoreServerTest, OneSetAnswersEveryClientWaitingOnTheKey) {
  auto server = StartServer();
  std::vector<std::unique_ptr<Client>> waiters;
  for (int i = 0; i < 200; ++i) {
    waiters.push_back(std::make_unique<Client>(server->port()));
    waiters.back()->Send(Q(Op::kWait) + Keys({"/go", "/ready"}));
  }
  Client writer(server->port());
  writer.Send(Q(Op::kSet) + Str("/ready") + Str("1"));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 200; }));
  writer.Send(Q(Op::kSet) + Str("/go") + Str("1"));
  for (auto& w : waiters) EXPECT_EQ(w->Recv(1), Byte(tcpstore::kStopWaiting));
  EXPECT_EQ(server->Stats().parked_waits, 0);
}

// A key named many times in one wait is held, and answered, once: counted
// a thousand times it would be over max_waiter_bytes (and each copy an
// entry to drop one by one when the connection closes).
TEST(TcpStoreServerTest, AKeyNamedTwiceInAWaitIsHeldOnce) {
  TcpStoreServerOptions o;
  // One address may hold a quarter of it: this wait's 648 bytes.
  o.limits.max_waiter_bytes = 4 * (kTcpStoreWaitBytes + 100);
  auto server = StartServer(o);
  Client waiter(server->port()), writer(server->port());
  std::string frame = Q(Op::kWait) + U64(1001) + Str("/a");
  for (int i = 0; i < 1000; ++i) frame += Str("/k");
  waiter.Send(frame);
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  writer.Send(Q(Op::kSet) + Str("/k") + Str("1"));
  writer.Send(Q(Op::kPing) + U32(1));
  ASSERT_EQ(writer.Recv(4), U32(1));
  EXPECT_EQ(server->Stats().parked_waits, 1);  // /a is still missing
  writer.Send(Q(Op::kSet) + Str("/a") + Str("1"));
  EXPECT_EQ(waiter.Recv(1), Byte(tcpstore::kStopWaiting));
  // One answer only: the next byte is the ping's.
  waiter.Send(Q(Op::kPing) + U32(5));
  EXPECT_EQ(waiter.Recv(4), U32(5));
  EXPECT_EQ(server->Stats().protocol_errors, 0);
}

TEST(TcpStoreServerTest, ADisconnectedClientsParkedWaitIsFreed) {
  auto server = StartServer();
  {
    Client c(server->port());
    c.Send(Q(Op::kWait) + Keys({"/x"}));
    ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  }
  EXPECT_TRUE(WaitFor([&] {
    const TcpStoreStats s = server->Stats();
    return s.parked_waits == 0 && s.clients == 0;
  }));
  Client c(server->port());
  c.Send(Q(Op::kSet) + Str("/x") + Str("1"));
  c.Send(Q(Op::kPing) + U32(3));
  EXPECT_EQ(c.Recv(4), U32(3));
}

TEST(TcpStoreServerTest, BadFramesCloseTheConnectionAndTheServerServesOn) {
  TcpStoreServerOptions o;
  o.limits.max_key_bytes = 64;
  o.limits.max_value_bytes = 1024;
  o.limits.max_total_bytes = 4096;
  o.limits.max_waiters_per_peer = 1;
  auto server = StartServer(o);
  int64_t errors = 0;
  auto expect_closed = [&](const std::string& frame, bool validate = true) {
    Client c(server->port(), validate);
    c.Send(frame);
    EXPECT_TRUE(c.Closed()) << frame.size();
    EXPECT_EQ(server->Stats().protocol_errors, ++errors);
  };
  expect_closed(Byte(99));                             // unknown type
  expect_closed(Q(Op::kValidate) + U32(1));            // wrong magic
  expect_closed(Q(Op::kGet) + U64(65));                // key too long
  expect_closed(Q(Op::kSet) + Str("/k") + U64(1025));  // value too long
  expect_closed(Q(Op::kWait) + U64(100000));           // too many keys
  expect_closed(Q(Op::kGet) + Str("/missing"));
  expect_closed(Q(Op::kSet) + Str("/k") + Str("abc") + Q(Op::kAdd) + Str("/k") +
                U64(1));  // add to a non-number
  expect_closed(Q(Op::kWait) + Keys({"/w1"}) + Q(Op::kWait) + Keys({"/w2"}));
  std::string fill;
  for (int i = 0; i < 8; ++i) {
    fill += Q(Op::kSet) + Str("/f" + std::to_string(i)) +
            Str(std::string(900, 'x'));
  }
  expect_closed(fill);  // max_total_bytes
  {
    // Truncated: the peer closes in the middle of a frame.
    Client c(server->port());
    c.Send(Q(Op::kSet) + Str("/k") + U64(10) + "abc");
    shutdown(-1, SHUT_WR);
  }
  EXPECT_TRUE(WaitFor([&] {
    return server->Stats().protocol_errors == errors + 1 &&
           server->Stats().clients == 0;
  }));
  Client c(server->port());
  c.Send(Q(Op::kSet) + Str("/ok") + Str("1"));
  c.Send(Q(Op::kGet) + Str("/ok"));
  EXPECT_EQ(c.Bytes(), "1");
}

// One ping round trip on `c`.
void Ping(Client& c, uint32_t n) {
  c.Send(Q(Op::kPing) + U32(n));
  ASSERT_EQ(c.Recv(4), U32(n));
}

// Without busy_poll a request finds the loop asleep and wakes it; within
// busy_poll of its last answer, the next request finds it awake.
TEST(TcpStoreServerTest, TheLoopStaysAwakeForBusyPollAfterItsLastWork) {
  TcpStoreServerOptions o;
  o.busy_poll = absl::ZeroDuration();
  {
    auto server = StartServer(o);
    Client c(server->port());
    Ping(c, 0);  // the connection accepted and served
    for (uint32_t i = 1; i <= 10; ++i) {
      ASSERT_TRUE(WaitFor([] { return LoopState() == 'S'; }));
      const int64_t before = server->Stats().sleeps;
      Ping(c, i);
      EXPECT_EQ(server->Stats().sleeps, before + 1);
    }
  }
  o.busy_poll = absl::Seconds(2);
  auto server = StartServer(o);
  Client c(server->port());
  Ping(c, 0);
  const int64_t awake = server->Stats().sleeps;
  EXPECT_GE(awake, 1);  // the connection woke it
  ASSERT_EQ(LoopState(), 'R');
  for (uint32_t i = 1; i <= 10; ++i) {
    // Given time to fall asleep between requests, it stays awake.
    EXPECT_FALSE(
        WaitFor([] { return LoopState() == 'S'; }, absl::Milliseconds(20)));
    Ping(c, i);
  }
  EXPECT_EQ(server->Stats().sleeps, awake);
}

// After a gap longer than busy_poll the loop does not poll at all: it
// sleeps as soon as it has answered, until requests come closer together.
TEST(TcpStoreServerTest, TheLoopPollsOnlyAfterAShortGap) {
  TcpStoreServerOptions o;
  o.busy_poll = absl::Seconds(1);
  auto server = StartServer(o);
  Client c(server->port());
  Ping(c, 0);
  // The window after that ping runs out: asleep.
  ASSERT_TRUE(WaitFor([] { return LoopState() == 'S'; }));
  int64_t before = server->Stats().sleeps;
  Ping(c, 1);  // after a gap of at least busy_poll
  EXPECT_EQ(server->Stats().sleeps, before + 1);
  // Not polling: asleep again well within the window.
  EXPECT_TRUE(
      WaitFor([] { return LoopState() == 'S'; }, absl::Milliseconds(500)));
  before = server->Stats().sleeps;
  Ping(c, 2);  // a short gap: it polls after this one
  Ping(c, 3);
  EXPECT_EQ(server->Stats().sleeps, before + 1);
  EXPECT_FALSE(
      WaitFor([] { return LoopState() == 'S'; }, absl::Milliseconds(100)));
}

// Sets, which TCPStore's clients send without waiting for an answer: two
// batches in a row that answered no one make the loop pause before its
// next read, so that a stream of them is read many at once. Requests that
// are answered (a set followed by its get, pings) never make it pause.
TEST(TcpStoreServerTest, TheLoopPausesBehindAStreamOfSetsNotAnswers) {
  TcpStoreServerOptions o;
  o.set_stream_pause = absl::Milliseconds(5);
  auto server = StartServer(o);
  // Connections, their validation (no answer either) and pings: no pause.
  std::vector<std::unique_ptr<Client>> others;
  for (int i = 0; i < 5; ++i) {
    others.push_back(std::make_unique<Client>(server->port()));
  }
  for (auto& other : others) Ping(*other, 7);
  Client c(server->port());
  auto sets = [&] {
    const auto r = server->Stats().requests;
    return r.count("set") ? r.at("set") : int64_t{0};
  };
  for (int i = 0; i < 20; ++i) {
    Ping(c, static_cast<uint32_t>(i));
    c.Send(Q(Op::kSet) + Str("/k") + Str(absl::StrCat(i)));
    c.Send(Q(Op::kGet) + Str("/k"));
    ASSERT_EQ(c.Bytes(), absl::StrCat(i));
  }
  EXPECT_EQ(server->Stats().stream_pauses, 0);
  // One set per batch: each read waits for the loop to serve the last.
  for (int i = 0; i < 5; ++i) {
    c.Send(Q(Op::kSet) + Str("/s") + Str(absl::StrCat(i)));
    const int64_t want = 20 + i + 1;
    ASSERT_TRUE(WaitFor([&] { return sets() == want; }));
  }
  EXPECT_GE(server->Stats().stream_pauses, 1);
  // A request that needs an answer is served after the pause, and ends
  // the stream: no pause after it.
  c.Send(Q(Op::kGet) + Str("/s"));
  EXPECT_EQ(c.Bytes(), "4");
  const int64_t pauses = server->Stats().stream_pauses;
  for (uint32_t i = 0; i < 10; ++i) Ping(c, i);
  EXPECT_EQ(server->Stats().stream_pauses, pauses);
}

TEST(TcpStoreServerTest, ReadingPausesPastThePendingOutputBoundAndResumes) {
  TcpStoreServerOptions o;
  o.max_pending_output_bytes = 64 * 1024;
  auto server = StartServer(o);
  Client c(server->port());
  c.Send(Q(Op::kSet) + Str("/big") + Str(std::string(60000, 'b')));
  // 200 gets of 60 kB that the client does not read yet.
  std::string gets;
  for (int i = 0; i < 200; ++i) gets += Q(Op::kGet) + Str("/big");
  std::thread sender([&] { c.Send(gets); });
  ASSERT_TRUE(WaitFor([&] { return Served(*server, "get", 1); }));
  for (int i = 0; i < 200; ++i) ASSERT_EQ(c.Bytes().size(), 60000u) << i;
  sender.join();
}

// Each connection's buffers are bounded on their own; together they are
// bounded too: past max_buffered_bytes the connection holding the most
// (here: a request received in part) is closed, and the others are served.
TEST(TcpStoreServerTest, AllConnectionsBuffersTogetherAreBounded) {
  TcpStoreServerOptions o;
  o.max_buffered_bytes = 9 << 18;  // 2.25 MiB
  auto server = StartServer(o);
  // Idle connections, each with a request served: their buffers are kept
  // for reuse but hold nothing, and are not counted.
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<Client>(server->port()));
    Ping(*idle.back(), static_cast<uint32_t>(i));
  }
  std::vector<std::unique_ptr<Client>> partial;
  for (int i = 0; i < 2; ++i) {
    partial.push_back(std::make_unique<Client>(server->port()));
    // A set of a 900 KiB value, 700 KiB of it sent: a 1 MiB buffer.
    partial.back()->Send(Q(Op::kSet) + Str("/big") + U64(900 << 10) +
                         std::string(700 << 10, 'x'));
  }
  // 300 KiB of a third (a 512 KiB buffer) takes them over: one of the
  // 1 MiB ones goes, and the rest are under the bound again.
  partial.push_back(std::make_unique<Client>(server->port()));
  partial.back()->Send(Q(Op::kSet) + Str("/big") + U64(900 << 10) +
                       std::string(300 << 10, 'x'));
  EXPECT_TRUE(WaitFor([&] { return server->Stats().protocol_errors >= 1; }));
  for (size_t i = 0; i < idle.size(); ++i) {
    Ping(*idle[i], static_cast<uint32_t>(i));
  }
  EXPECT_EQ(server->Stats().protocol_errors, 1);
  Client c(server->port());
  c.Send(Q(Op::kSet) + Str("/ok") + Str("1"));
  c.Send(Q(Op::kGet) + Str("/ok"));
  EXPECT_EQ(c.Bytes(), "1");
}

// A get or multi_get answer refers to the stored value rather than
// copying it (TcpStoreValue): a value overwritten, then deleted, while an
// answer holding it waits for its reader is still answered as it was.
TEST(TcpStoreServerTest, AQueuedAnswerKeepsTheValueItWasGiven) {
  TcpStoreServerOptions o;
  o.max_pending_output_bytes = size_t{64} << 20;
  auto server = StartServer(o);
  Client writer(server->port());
  const std::string old_value(1 << 20, 'a');
  writer.Send(Q(Op::kSet) + Str("/v") + Str(old_value));
  // Answered once the set is in: the readers' requests find the key.
  writer.Send(Q(Op::kWait) + Keys({"/v"}));
  ASSERT_EQ(writer.Recv(1), Byte(tcpstore::kStopWaiting));
  // 48 MiB: more than the kernel's socket buffers take, so most of it
  // waits in the server for the reader.
  Client reader(server->port());
  reader.Send(Q(Op::kMultiGet) + RepeatedKeys("/v", 48));
  ASSERT_TRUE(WaitFor([&] { return Served(*server, "multi_get", 1); }));
  writer.Send(Q(Op::kSet) + Str("/v") + Str(std::string(1 << 20, 'b')));
  writer.Send(Q(Op::kGet) + Str("/v"));
  EXPECT_TRUE(writer.Bytes() == std::string(1 << 20, 'b'));
  writer.Send(Q(Op::kDeleteKey) + Str("/v"));
  EXPECT_EQ(writer.Int(), 1);
  // (Compared apart: a failure need not print 1 MiB.)
  for (int i = 0; i < 48; ++i) ASSERT_TRUE(reader.Bytes() == old_value) << i;
}

// What answers of stored values wait to send is the store's bytes, not
// the connection's: readers slow to take 24 MiB answers each do not pass
// max_buffered_bytes (8 MiB), where copies of the values would have, and
// got the connections holding the most closed.
TEST(TcpStoreServerTest, QueuedValuesAreNotCountedAsConnectionBuffers) {
  TcpStoreServerOptions o;
  o.max_pending_output_bytes = size_t{64} << 20;
  o.max_buffered_bytes = size_t{8} << 20;
  auto server = StartServer(o);
  Client writer(server->port());
  const std::string value(1 << 20, 'v');
  writer.Send(Q(Op::kSet) + Str("/v") + Str(value));
  writer.Send(Q(Op::kWait) + Keys({"/v"}));
  ASSERT_EQ(writer.Recv(1), Byte(tcpstore::kStopWaiting));
  std::vector<std::unique_ptr<Client>> readers;
  for (int i = 0; i < 4; ++i) {
    readers.push_back(std::make_unique<Client>(server->port()));
    readers.back()->Send(Q(Op::kMultiGet) + RepeatedKeys("/v", 24));
  }
  ASSERT_TRUE(WaitFor([&] { return Served(*server, "multi_get", 4); }));
  EXPECT_LT(server->Stats().buffered_bytes, 1 << 20);
  for (auto& r : readers) {
    for (int i = 0; i < 24; ++i) ASSERT_TRUE(r->Bytes() == value) << i;
  }
  EXPECT_EQ(server->Stats().protocol_errors, 0);
}

TEST(TcpStoreServerTest, AllowedPeersAreCheckedAtAccept) {
  auto server = StartServer();
  server->SetAllowedPeers({"10.1.2.3", "::1"});
  {
    Client c(server->port());
    EXPECT_TRUE(c.Closed());
  }
  EXPECT_EQ(server->Stats().refused_connections, 1);
  server->SetAllowedPeers({"10.1.2.3", "127.0.0.1"});
  Client c(server->port());
  c.Send(Q(Op::kPing) + U32(5));
  EXPECT_EQ(c.Recv(4), U32(5));
  server->SetAllowedPeers({});
  Client d(server->port());
  d.Send(Q(Op::kPing) + U32(6));
  EXPECT_EQ(d.Recv(4), U32(6));
}

TEST(TcpStoreServerTest, ConnectionsPerPeerAreBounded) {
  TcpStoreServerOptions o;
  o.max_connections_per_peer = 2;
  auto server = StartServer(o);
  Client a(server->port()), b(server->port());
  Client c(server->port());
  EXPECT_TRUE(c.Closed());
  EXPECT_EQ(server->Stats().refused_connections, 1);
  a.Send(Q(Op::kPing) + U32(1));
  EXPECT_EQ(a.Recv(4), U32(1));
}

TEST(TcpStoreServerTest, ATakenPortIsUnavailableNamingIt) {
  auto server = StartServer();
  TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.port = server->port();
  auto again = TcpStoreServer::Start(o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(again.status().message().find("127.0.0.1:" +
                                          std::to_string(server->port())),
            std::string::npos)
      << again.status();
  o.host = "not-an-address";
  EXPECT_EQ(TcpStoreServer::Start(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Out of descriptors, the loop stops accepting; it accepts again within
// about a second even when no client of its own leaves (the descriptors
// were the rest of the process's).
TEST(TcpStoreServerTest, AcceptingResumesAfterTheProcessRanOutOfDescriptors) {
  auto server = StartServer();
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 512;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  // Whatever happens below, the descriptors and the limit come back.
  auto restore = absl::MakeCleanup([&] {
    for (int fd : filler) close(fd);
    setrlimit(RLIMIT_NOFILE, &saved);
  });
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
    filler.push_back(fd);
  }
  ASSERT_FALSE(filler.empty());
  close(filler.back());  // one descriptor: the client's socket
  filler.pop_back();
  Client c(server->port());
  c.Send(Q(Op::kPing) + U32(1));
  // Not accepted: the server has no descriptor for it, and says so (once
  // a second while it lasts: a slow machine may see more than one).
  ASSERT_TRUE(WaitFor([&] { return server->Stats().accept_pauses >= 1; }));
  EXPECT_EQ(server->Stats().clients, 0);
  std::move(restore).Invoke();
  EXPECT_EQ(c.Recv(4), U32(1));
}

TEST(TcpStoreServerTest, ShutdownClosesEveryClientAtOnce) {
  auto server = StartServer();
  Client c(server->port());
  c.Send(Q(Op::kWait) + Keys({"/x"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  const absl::Time start = absl::Now();
  server->Shutdown();
  server->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_TRUE(c.Closed());
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

// A connection that got a large answer and went idle keeps a small buffer
// only, and what every connection holds is counted: 9,000 such ones once
// held 1 GB that max_buffered_bytes did not see.
TEST(TcpStoreServerTest, AnIdleConnectionHoldsASmallCountedBuffer) {
  auto server = StartServer();
  Client writer(server->port());
  writer.Send(Q(Op::kSet) + Str("/big") + Str(std::string(60000, 'v')));
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(std::make_unique<Client>(server->port()));
    idle.back()->Send(Q(Op::kGet) + Str("/big"));
    ASSERT_EQ(idle.back()->Bytes().size(), 60000u);
  }
  // And one with a request in part: one byte of a frame.
  idle.push_back(std::make_unique<Client>(server->port()));
  idle.back()->Send(Q(Op::kSet));
  const int64_t conns = static_cast<int64_t>(idle.size()) + 1;
  EXPECT_TRUE(WaitFor([&] {
    const TcpStoreStats s = server->Stats();
    return s.clients == conns && s.buffered_bytes > 0 &&
           s.buffered_bytes <= conns * (1024 + 4096) + 4096;
  })) << server->Stats().buffered_bytes;
}

// A new connection that would take every connection's memory past
// max_buffered_bytes is refused at accept.
TEST(TcpStoreServerTest, ConnectionsAreRefusedWhenTheirMemoryIsFull) {
  TcpStoreServerOptions o;
  o.max_buffered_bytes = 3 * 1024 + 512;  // three idle connections
  auto server = StartServer(o);
  Client a(server->port()), b(server->port()), c(server->port());
  Ping(a, 1);
  Client d(server->port());
  EXPECT_TRUE(d.Closed());
  EXPECT_EQ(server->Stats().refused_connections, 1);
  Ping(c, 2);
}

// One address parks at most a quarter of max_waiters; the others' waits
// are served.
TEST(TcpStoreServerTest, OneAddressParksAtMostAQuarterOfTheWaits) {
  TcpStoreServerOptions o;
  o.limits.max_waiters = 40;
  auto server = StartServer(o);
  std::vector<std::unique_ptr<Client>> hostile;
  for (int i = 0; i < 11; ++i) {
    hostile.push_back(
        std::make_unique<Client>(server->port(), true, "127.0.0.9"));
    hostile.back()->Send(Q(Op::kWait) + Keys({"/never"}));
  }
  EXPECT_TRUE(WaitFor([&] { return server->Stats().protocol_errors == 1; }));
  EXPECT_EQ(server->Stats().parked_waits, 10);
  Client waiter(server->port()), writer(server->port());
  waiter.Send(Q(Op::kWait) + Keys({"/go"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 11; }));
  writer.Send(Q(Op::kSet) + Str("/go") + Str("1"));
  EXPECT_EQ(waiter.Recv(1), Byte(tcpstore::kStopWaiting));
}

// Four addresses at their share fill max_waiters: a fifth's wait closes
// the newest wait of one that holds the most, never the established wait
// of an address that holds less.
TEST(TcpStoreServerTest, AFullWaitBudgetTakesFromTheHeaviestAddress) {
  TcpStoreServerOptions o;
  o.limits.max_waiters = 8;
  auto server = StartServer(o);
  Client established(server->port());
  established.Send(Q(Op::kWait) + Keys({"/go"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 1; }));
  std::vector<std::unique_ptr<Client>> hostile;
  for (const char* from : {"127.0.0.9", "127.0.0.10", "127.0.0.11"}) {
    for (int i = 0; i < 2; ++i) {
      hostile.push_back(std::make_unique<Client>(server->port(), true, from));
      hostile.back()->Send(Q(Op::kWait) + Keys({"/never"}));
    }
  }
  hostile.push_back(
      std::make_unique<Client>(server->port(), true, "127.0.0.12"));
  hostile.back()->Send(Q(Op::kWait) + Keys({"/never"}));
  ASSERT_TRUE(WaitFor([&] { return server->Stats().parked_waits == 8; }));
  // Full: a newcomer evicts one of the addresses holding two.
  Client newcomer(server->port(), true, "127.0.0.13");
  newcomer.Send(Q(Op::kWait) + Keys({"/go"}));
  EXPECT_TRUE(WaitFor([&] { return server->Stats().evictions == 1; }));
  EXPECT_EQ(server->Stats().parked_waits, 8);
  Client writer(server->port());
  writer.Send(Q(Op::kSet) + Str("/go") + Str("1"));
  EXPECT_EQ(established.Recv(1), Byte(tcpstore::kStopWaiting));
  EXPECT_EQ(newcomer.Recv(1), Byte(tcpstore::kStopWaiting));
}

}  // namespace
}  // namespace distjob
