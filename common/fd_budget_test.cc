#include "common/fd_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// The hard open-file limit this test process started with.
rlim_t Hard() {
  rlimit now = {};
  getrlimit(RLIMIT_NOFILE, &now);
  return now.rlim_max;
}

// In a death test's child gtest reports no failure itself: each goes to
// stderr, which the parent shows when the child's exit code is not 0.
[[noreturn]] void ExitWithFailures() {
  const ::testing::TestResult* result =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  for (int i = 0; i < result->total_part_count(); ++i) {
    const ::testing::TestPartResult& part = result->GetTestPartResult(i);
    if (part.failed()) {
      std::fprintf(stderr, "%s:%d: %s\n",
                   part.file_name() ? part.file_name() : "?",
                   part.line_number(), part.message());
    }
  }
  _exit(result->Failed() ? 1 : 0);
}

// Runs `check` in a child process under `limit`: a hard limit, once
// lowered, cannot be raised back, so no test's limit may reach the next
// test, whatever their order. The child exits 0 when `check` passed.
void UnderLimit(rlimit limit, const std::function<void()>& check) {
  EXPECT_EXIT(
      {
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
          std::perror("setrlimit RLIMIT_NOFILE");
          _exit(2);
        }
        check();
        ExitWithFailures();
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(FdBudgetTest, EachStoreGetsHalfOfWhatTheLimitLeaves) {
  const rlim_t n = std::min<rlim_t>(Hard(), 1280);
  ASSERT_GT(n, kOtherFds + 64) << "the hard open-file limit is too low";
  UnderLimit({n, n}, [n] {
    EXPECT_EQ(ConnectionsThatFit(1), (n - kOtherFds) / 2);
    EXPECT_EQ(ConnectionsThatFit(2), (n - kOtherFds) / 4);
    size_t total = 65536, per_peer = 4096;
    FitConnections(1, "test: max_connections", &total, &per_peer);
    EXPECT_EQ(total, (n - kOtherFds) / 2);
    EXPECT_EQ(per_peer, total);
    size_t few = 16, few_per_peer = 10;
    FitConnections(1, "test: max_connections", &few, &few_per_peer);
    EXPECT_EQ(few, 16u);
    EXPECT_EQ(few_per_peer, 10u);
  });
}

TEST(FdBudgetTest, TheSoftLimitIsRaisedToTheHardOne) {
  const rlim_t hard = std::min<rlim_t>(Hard(), 1024);
  ASSERT_GT(hard, 300u) << "the hard open-file limit is too low";
  UnderLimit({300, hard}, [hard] {
    EXPECT_EQ(ConnectionsThatFit(1), (hard - kOtherFds) / 2);
    rlimit now = {};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
    EXPECT_EQ(now.rlim_cur, hard);
  });
}

TEST(FdBudgetTest, ATinyLimitStillLeavesAFew) {
  UnderLimit({200, 200}, [] { EXPECT_EQ(ConnectionsThatFit(2), 16u); });
}

}  // namespace
}  // namespace distjob
