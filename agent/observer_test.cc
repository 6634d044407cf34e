#include "agent/observer.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/cli/options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "observability/metrics.h"

namespace distjob {
namespace {

using ::testing::HasSubstr;

// A scrape as the agent starts must find every series labelled: the labels
// are set before the server is asked to listen. Here it cannot listen (the
// port is taken), and the series are labelled all the same.
TEST(ObserverTest, SeriesAreLabelledBeforeTheServerListens) {
  const int taken = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in6 address = {};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_any;
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
            0);
  ASSERT_EQ(listen(taken, 1), 0);
  socklen_t size = sizeof(address);
  getsockname(taken, reinterpret_cast<sockaddr*>(&address), &size);

  Metrics metrics;
  Observer observer(&metrics);
  RunOptions options;
  options.launch.rdzv_id = "train";
  options.launch.role = "trainer";
  options.launch.node_rank = 1;
  options.observability.metrics_port = ntohs(address.sin6_port);
  EXPECT_FALSE(observer.Start(options).ok());
  EXPECT_THAT(metrics.Render(),
              HasSubstr("distjob_attempt{job_name=\"train\",role=\"trainer\","
                        "node_rank=\"1\"} 0\n"));
  observer.Shutdown();
  close(taken);
}

}  // namespace
}  // namespace distjob
