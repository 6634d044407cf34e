#include "workerstore/tcpstore_sizing.h"

#include "gtest/gtest.h"
#include "workerstore/tcpstore_conn.h"
#include "workerstore/tcpstore_limits.h"

namespace distjob {
namespace {

TEST(TcpStoreSizingTest, NoExtraConnectionsKeepTheCaps) {
  const TcpStoreLimits defaults;
  TcpStoreLimits limits;
  size_t buffered = size_t{256} << 20;
  GrowForConnections(0, &buffered, &limits);
  EXPECT_EQ(buffered, size_t{256} << 20);
  EXPECT_EQ(limits.max_waiters, defaults.max_waiters);
  EXPECT_EQ(limits.max_waiter_bytes, defaults.max_waiter_bytes);
}

// 98,304 ranks of 1.13 clients (12,288 nodes x 8, two connections a rank):
// 180,224 connections past the default 16,384. Each may sit idle with the
// most an idle connection keeps, and each rank may park a barrier's wait.
TEST(TcpStoreSizingTest, A96KRankJobsConnectionsFitTheGrownCaps) {
  const TcpStoreLimits defaults;
  const size_t connections = 2 * 98304, extra = connections - 16384;
  TcpStoreLimits limits;
  size_t buffered = size_t{256} << 20;
  GrowForConnections(extra, &buffered, &limits);
  EXPECT_GE(buffered, connections * (kConnBytes + kIdleBufferBytes));
  EXPECT_GE(limits.max_waiters, connections);
  // A barrier's wait on one 40-byte key (TcpStoreWaits::Bytes), one a
  // rank, within the waits the default leaves them.
  EXPECT_GE(limits.max_waiter_bytes, 98304 * (kTcpStoreWaitBytes + 2 * 40));
  EXPECT_EQ(buffered, (size_t{256} << 20) + extra * (size_t{5} << 10));
  EXPECT_EQ(limits.max_waiter_bytes,
            defaults.max_waiter_bytes + extra * size_t{1152});
  // What does not grow with the connections stays.
  EXPECT_EQ(limits.max_total_bytes, defaults.max_total_bytes);
  EXPECT_EQ(limits.max_waiters_per_peer, defaults.max_waiters_per_peer);
  EXPECT_EQ(limits.max_keys_per_request, defaults.max_keys_per_request);
}

}  // namespace
}  // namespace distjob
