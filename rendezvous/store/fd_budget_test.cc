#include "rendezvous/store/fd_budget.h"

#include <sys/resource.h>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// Each test lowers this test process's own limit (it cannot be raised back
// past the hard limit, so the lowest comes last).
TEST(FdBudgetTest, EachStoreGetsHalfOfWhatTheLimitLeaves) {
  rlimit low = {1280, 1280};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  EXPECT_EQ(ConnectionsThatFit(1), (1280 - kOtherFds) / 2);
  EXPECT_EQ(ConnectionsThatFit(2), (1280 - kOtherFds) / 4);
  size_t total = 65536, per_peer = 4096;
  FitConnections(1, "test: max_connections", &total, &per_peer);
  EXPECT_EQ(total, (1280 - kOtherFds) / 2);
  EXPECT_EQ(per_peer, total);
  size_t few = 100, few_per_peer = 10;
  FitConnections(1, "test: max_connections", &few, &few_per_peer);
  EXPECT_EQ(few, 100u);
  EXPECT_EQ(few_per_peer, 10u);
}

TEST(FdBudgetTest, TheSoftLimitIsRaisedToTheHardOne) {
  rlimit soft_low = {300, 1024};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &soft_low), 0);
  EXPECT_EQ(ConnectionsThatFit(1), (1024 - kOtherFds) / 2);
  rlimit now = {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, 1024u);
}

TEST(FdBudgetTest, ATinyLimitStillLeavesAFew) {
  rlimit tiny = {200, 200};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tiny), 0);
  EXPECT_EQ(ConnectionsThatFit(2), 16u);
}

}  // namespace
}  // namespace distjob
