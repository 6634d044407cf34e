#include "common/fd_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "common/logging.h"
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
// lowered, cannot be raised back, and the declared needs are the
// process's, so neither may reach the next test, whatever their order.
// The child exits 0 when `check` passed; its stderr (the log) must match
// `log`.
void UnderLimit(rlimit limit, const std::function<void()>& check,
                const std::string& log = "") {
  EXPECT_EXIT(
      {
        InitLogging(LogLevel::kInfo);
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
          std::perror("setrlimit RLIMIT_NOFILE");
          _exit(2);
        }
        check();
        ExitWithFailures();
      },
      ::testing::ExitedWithCode(0), log);
}

TEST(FdBudgetTest, ACapIsWhatIsLeftAfterTheOthersNeed) {
  EXPECT_EQ(ConnectionsThatFit(20000, 1, 0), 20000 - kOtherFds);
  // The workers' store beside a 100-node rendezvous (2 fds a connection).
  EXPECT_EQ(ConnectionsThatFit(20000, 1, 200), 20000 - kOtherFds - 200);
  // The rendezvous store beside 8 ranks (two connections each).
  EXPECT_EQ(ConnectionsThatFit(20000, 2, 16), (20000 - kOtherFds - 16) / 2);
  EXPECT_EQ(ConnectionsThatFit(1 << 20, 1, 0), (1u << 20) - kOtherFds);
}

TEST(FdBudgetTest, ATinyLimitStillLeavesAFew) {
  EXPECT_EQ(ConnectionsThatFit(200, 2, 0), kMinConnections);
  EXPECT_EQ(ConnectionsThatFit(1024, 1, 5000), kMinConnections);
  EXPECT_EQ(ConnectionsThatFit(kOtherFds + 20, 2, 0), kMinConnections);
  EXPECT_EQ(ConnectionsThatFit(kOtherFds + 20, 1, 0), 20u);
}

TEST(FdBudgetTest, NoLimitCutsNothing) {
  EXPECT_EQ(ConnectionsThatFit(RLIM_INFINITY, 2, 1000), SIZE_MAX);
}

TEST(FdBudgetTest, EachStoreIsCutAfterTheOthersDeclaredNeed) {
  const rlim_t n = std::min<rlim_t>(Hard(), 1280);
  ASSERT_GT(n, kOtherFds + 64) << "the hard open-file limit is too low";
  UnderLimit(
      {n, n},
      [n] {
        // A one-node c10d job of 8 ranks: 16 and 1 connections.
        DeclareConnectionNeed(FdUser::kWorkerStore, 16, 1);
        DeclareConnectionNeed(FdUser::kRendezvousStore, 1, 2);
        size_t total = 65536, per_peer = 4096;
        FitConnections(FdUser::kWorkerStore, 1, "test: max_connections", &total,
                       &per_peer);
        EXPECT_EQ(total, n - kOtherFds - 2);
        EXPECT_EQ(per_peer, total);
        size_t rdzv = 65536, rdzv_per_peer = 64;
        FitConnections(FdUser::kRendezvousStore, 2, "test: store_max_conns",
                       &rdzv, &rdzv_per_peer);
        EXPECT_EQ(rdzv, (n - kOtherFds - 16) / 2);
        EXPECT_EQ(rdzv_per_peer, 64u);
        // The health server's few, within kOtherFds: after both stores.
        size_t health = 65536, health_per_peer = 32;
        FitConnections(FdUser::kOther, 2, "test: health", &health,
                       &health_per_peer);
        EXPECT_EQ(health, (n - kOtherFds - 16 - 2) / 2);
        size_t few = 16, few_per_peer = 10;
        FitConnections(FdUser::kWorkerStore, 1, "test: max_connections", &few,
                       &few_per_peer);
        EXPECT_EQ(few, 16u);
        EXPECT_EQ(few_per_peer, 10u);
      },
      // A cut the job's need fits in: once, at info.
      "info\\] test: max_connections=65536 cut to [0-9]+ by the open-file "
      "limit");
}

TEST(FdBudgetTest, ACutThatHoldsTheJobIsNoWarning) {
  const rlim_t n = std::min<rlim_t>(Hard(), 1280);
  ASSERT_GT(n, kOtherFds + 64) << "the hard open-file limit is too low";
  UnderLimit(
      {n, n},
      [] {
        DeclareConnectionNeed(FdUser::kWorkerStore, 2, 1);
        size_t total = 65536, per_peer = 4096;
        FitConnections(FdUser::kWorkerStore, 1, "test: max_connections", &total,
                       &per_peer);
      },
      // The child's whole stderr: that one line, at info, and no other.
      "^\\[[^]]* info\\] test: max_connections=65536 cut to " +
          std::to_string(n - kOtherFds) + " by the open-file limit \\(" +
          std::to_string(n) +
          "; 1 descriptor\\(s\\) a connection\\), which holds the 2 this job "
          "needs\n$");
}

TEST(FdBudgetTest, ACutBelowTheJobsNeedWarnsNamingIt) {
  const rlim_t n = std::min<rlim_t>(Hard(), 1024);
  ASSERT_GT(n, kOtherFds + 64) << "the hard open-file limit is too low";
  const std::string fit = std::to_string(n - kOtherFds);
  UnderLimit(
      {n, n},
      [] {
        // 250 nodes × 8 ranks × 2 connections.
        DeclareConnectionNeed(FdUser::kWorkerStore, 4000, 1);
        size_t total = 16384, per_peer = 4096;
        FitConnections(FdUser::kWorkerStore, 1, "test: max_connections", &total,
                       &per_peer);
        // Logged once: the second cut says nothing.
        total = 16384;
        FitConnections(FdUser::kWorkerStore, 1, "test: again", &total,
                       &per_peer);
      },
      "warning\\] test: max_connections=16384 cut to " + fit +
          " by the open-file limit \\(" + std::to_string(n) +
          "\\), below the 4000 connection\\(s\\) this job's declared size "
          "needs; raise the pod's open-file limit \\(ulimit -n\\) by at "
          "least " +
          std::to_string(4000 - (n - kOtherFds)) + "\n$");
}

TEST(FdBudgetTest, ACapBelowTheJobsNeedWarnsUncut) {
  const rlim_t n = std::min<rlim_t>(Hard(), 1280);
  ASSERT_GT(n, kOtherFds + 64) << "the hard open-file limit is too low";
  UnderLimit(
      {n, n},
      [] {
        DeclareConnectionNeed(FdUser::kRendezvousStore, 200, 2);
        size_t total = 100, per_peer = 64;
        FitConnections(FdUser::kRendezvousStore, 2, "test: store_max_conns",
                       &total, &per_peer);
        EXPECT_EQ(total, 100u);
      },
      "warning\\] test: store_max_conns=100 is below the 200 connection\\(s\\) "
      "this job's declared size needs: connections past 100 are refused\n$");
}

TEST(FdBudgetTest, TheSoftLimitIsRaisedToTheHardOne) {
  const rlim_t hard = std::min<rlim_t>(Hard(), 1024);
  ASSERT_GT(hard, 300u) << "the hard open-file limit is too low";
  UnderLimit({300, hard}, [hard] {
    const OpenFileLimit raised = RaiseOpenFileLimit();
    EXPECT_EQ(raised.soft_before, 300u);
    EXPECT_EQ(raised.soft, hard);
    EXPECT_EQ(raised.hard, hard);
    EXPECT_TRUE(raised.raised());
    rlimit now = {};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
    EXPECT_EQ(now.rlim_cur, hard);
  });
}

}  // namespace
}  // namespace distjob
