#include "workerstore/tcpstore_sizing.h"

#include "gtest/gtest.h"
#include "workerstore/tcpstore_limits.h"

namespace distjob {
namespace {

TEST(TcpStoreSizingTest, SmallJobsKeepTheDefaults) {
  const TcpStoreServerOptions defaults;
  for (size_t connections : {size_t{0}, size_t{2}, defaults.max_connections}) {
    const TcpStoreServerOptions o = TcpStoreOptionsFor(connections);
    EXPECT_EQ(o.max_connections, defaults.max_connections);
    EXPECT_EQ(o.max_connections_per_peer, defaults.max_connections_per_peer);
    EXPECT_EQ(o.max_buffered_bytes, defaults.max_buffered_bytes);
    EXPECT_EQ(o.limits.max_waiters, defaults.limits.max_waiters);
    EXPECT_EQ(o.limits.max_waiter_bytes, defaults.limits.max_waiter_bytes);
  }
}

// 98,304 ranks of 1.13 clients (12,288 nodes × 8, two connections a rank):
// every connection is admitted, each may park a barrier's wait, and what
// they hold idle fits max_buffered_bytes.
TEST(TcpStoreSizingTest, A96KRankJobIsAdmitted) {
  const TcpStoreServerOptions defaults;
  const size_t connections = 2 * 98304;
  const TcpStoreServerOptions o = TcpStoreOptionsFor(connections);
  EXPECT_EQ(o.max_connections, connections);
  EXPECT_GE(o.limits.max_waiters, connections);
  // A barrier wait on one 40-byte key: TcpStoreWaits::Bytes.
  EXPECT_GE(o.limits.max_waiter_bytes, 98304 * (kTcpStoreWaitBytes + 2 * 40));
  EXPECT_GE(o.max_buffered_bytes, connections * size_t{1024});
  // Each grew by what the connections past the default bring, no more.
  const size_t extra = connections - defaults.max_connections;
  EXPECT_EQ(o.max_buffered_bytes,
            defaults.max_buffered_bytes + extra * kBufferedBytesPerConnection);
  EXPECT_EQ(o.limits.max_waiter_bytes, defaults.limits.max_waiter_bytes +
                                           extra * kWaiterBytesPerConnection);
  // What does not grow with the clients stays.
  EXPECT_EQ(o.max_connections_per_peer, defaults.max_connections_per_peer);
  EXPECT_EQ(o.max_frame_bytes, defaults.max_frame_bytes);
  EXPECT_EQ(o.limits.max_total_bytes, defaults.limits.max_total_bytes);
  EXPECT_EQ(o.limits.max_waiters_per_peer,
            defaults.limits.max_waiters_per_peer);
}

}  // namespace
}  // namespace distjob
