#include "workerstore/tcpstore_conn.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(TcpStoreConnTest, ReadRoomGrowsByDoublingUpToOneFrameAndAChunk) {
  TcpStoreConn c;
  EXPECT_EQ(c.ReadRoom(size_t{1} << 20), kTcpStoreReadChunk);
  c.in_len = kTcpStoreReadChunk;  // a full read, no request complete
  EXPECT_EQ(c.ReadRoom(size_t{1} << 20), kTcpStoreReadChunk);
  EXPECT_EQ(c.in.size(), 2 * kTcpStoreReadChunk);
  c.in_len = c.in.size();
  c.ReadRoom(size_t{1} << 20);
  EXPECT_EQ(c.in.size(), 4 * kTcpStoreReadChunk);
  // A small frame limit caps the doubling at what one more chunk needs.
  TcpStoreConn small;
  small.ReadRoom(1000);
  small.in_len = small.in.size();
  small.ReadRoom(1000);
  EXPECT_EQ(small.in.size(), 2 * kTcpStoreReadChunk);
}

TEST(TcpStoreConnTest, ReadRoomMovesUnservedBytesToTheFront) {
  TcpStoreConn c;
  c.ReadRoom(size_t{1} << 20);
  c.in.replace(0, 5, "xxabc");
  c.in_off = 2;
  c.in_len = kTcpStoreReadChunk;
  c.ReadRoom(size_t{1} << 20);
  EXPECT_EQ(c.in_off, 0u);
  EXPECT_EQ(c.in_len, kTcpStoreReadChunk - 2);
  EXPECT_EQ(c.in.substr(0, 3), "abc");
}

TEST(TcpStoreConnTest, ADrainedConnectionGivesItsRequestBufferBack) {
  std::string read_buffer;
  TcpStoreConn c;
  c.LendInput(&read_buffer);
  c.ReadRoom(size_t{1} << 20);
  c.in_off = c.in_len = 10;                    // all served
  EXPECT_EQ(c.ReturnInput(&read_buffer), 0u);  // kept as the read buffer
  EXPECT_TRUE(c.in.empty());
  EXPECT_EQ(read_buffer.size(), kTcpStoreReadChunk);
  // Lent again to the next connection with nothing buffered.
  TcpStoreConn next;
  next.LendInput(&read_buffer);
  EXPECT_EQ(next.in.size(), kTcpStoreReadChunk);
  EXPECT_TRUE(read_buffer.empty());
}

TEST(TcpStoreConnTest, ADrainedConnectionGivesALargeRequestBufferBack) {
  std::string read_buffer = "taken";
  TcpStoreConn c;
  // A 1 MiB frame's buffer, all of it served.
  while (c.in.size() < (size_t{1} << 20)) {
    c.ReadRoom(size_t{64} << 20);
    c.in_len = c.in.size();
  }
  c.in_off = c.in_len;
  const size_t large = c.in.capacity();
  EXPECT_EQ(c.ReturnInput(&read_buffer), large);
  EXPECT_LE(c.in.capacity(), kIdleBufferBytes);
  EXPECT_EQ(c.Holds(), kConnBytes + c.in.capacity() + c.out.capacity());
}

TEST(TcpStoreConnTest, ARequestInPartIsKeptInASmallBuffer) {
  std::string read_buffer = "taken";
  TcpStoreConn c;
  c.ReadRoom(size_t{1} << 20);
  c.in.replace(0, 3, "abc");
  c.in_len = 3;
  EXPECT_GE(c.ReturnInput(&read_buffer), kTcpStoreReadChunk);
  EXPECT_EQ(c.in.size(), kIdleBufferBytes);
  EXPECT_EQ(c.in.substr(0, 3), "abc");
  EXPECT_EQ(c.in_off, 0u);
  EXPECT_EQ(c.in_len, 3u);
}

TEST(TcpStoreConnTest, SendDrainsAndShrinksTheAnswerBuffer) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  TcpStoreConn c;
  c.fd = fds[0];
  c.out.assign(3 * kIdleBufferBytes, 'a');
  EXPECT_EQ(c.PendingOutput(), 3 * kIdleBufferBytes);
  EXPECT_GE(c.Send(), 3 * kIdleBufferBytes);
  EXPECT_EQ(c.PendingOutput(), 0u);
  EXPECT_LE(c.out.capacity(), kIdleBufferBytes);
  EXPECT_EQ(c.Holds(), kConnBytes + c.in.capacity() + c.out.capacity());
  char got[3 * kIdleBufferBytes];
  size_t total = 0;
  while (total < sizeof(got)) {
    const ssize_t n = read(fds[1], got + total, sizeof(got) - total);
    ASSERT_GT(n, 0);
    total += static_cast<size_t>(n);
  }
  close(fds[0]);
  close(fds[1]);
}

// What `fd` receives until `n` bytes came.
std::string ReadAll(int fd, size_t n) {
  std::string got;
  char buf[65536];
  while (got.size() < n) {
    const ssize_t r = read(fd, buf, std::min(sizeof(buf), n - got.size()));
    if (r <= 0) break;
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

TEST(TcpStoreConnTest, SharedValuesGoOutInOrderBetweenOwnBytes) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  TcpStoreConn c;
  c.fd = fds[0];
  c.out = "head";
  auto value = std::make_shared<const std::string>("VALUE");
  c.AppendShared(value);
  c.AppendShared(value);
  c.out += "tail";
  EXPECT_EQ(c.PendingOutput(), 4u + 5 + 5 + 4);
  // The shared bytes are not the connection's: its segments' bookkeeping.
  EXPECT_EQ(c.Holds(), kConnBytes + c.in.capacity() + c.out.capacity() +
                           c.queued_capacity +
                           c.queued.capacity() * sizeof(TcpStoreOutSegment));
  c.Send();
  EXPECT_EQ(c.PendingOutput(), 0u);
  EXPECT_EQ(c.queued.capacity(), 0u);  // freed once sent
  EXPECT_EQ(ReadAll(fds[1], 18), "headVALUEVALUEtail");
  close(fds[0]);
  close(fds[1]);
}

TEST(TcpStoreConnTest, AValueInPlaceIsCopiedASharedOneReferred) {
  TcpStoreConn c;
  const TcpStoreValue small(std::string(100, 's'));
  const TcpStoreValue large(std::string(kShareValuesFrom, 'l'));
  c.AppendValue(small);
  EXPECT_TRUE(c.queued.empty());
  EXPECT_EQ(c.out, small.wire());
  c.AppendValue(large);
  ASSERT_EQ(c.queued.size(), 2u);  // the copy so far, then the shared one
  EXPECT_EQ(c.queued.back().shared, large.shared());
  EXPECT_EQ(c.PendingOutput(), small.wire().size() + large.wire().size());
}

// A socket that takes part of an answer at a time: each send resumes in
// the middle of a segment, and the values stay alive while queued.
TEST(TcpStoreConnTest, SendResumesInsideASharedValue) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  const int small = 4096;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  TcpStoreConn c;
  c.fd = fds[0];
  std::string want;
  for (int i = 0; i < 600; ++i) {
    // More segments than one sendmsg gathers, each dropped by its maker.
    auto v = std::make_shared<const std::string>(1000 + i, 'a' + i % 26);
    c.AppendShared(v);
    want += *v;
    if (i % 7 == 0) {
      c.out += std::to_string(i);
      want += std::to_string(i);
    }
  }
  std::string got;
  char buf[65536];
  while (got.size() < want.size()) {
    c.Send();
    const ssize_t r = read(fds[1], buf, sizeof(buf));
    if (r > 0) got.append(buf, static_cast<size_t>(r));
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(c.PendingOutput(), 0u);
  EXPECT_EQ(c.queued_capacity, 0u);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace distjob
