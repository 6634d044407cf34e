#include "supervisor/worker_logs.h"

#include <unistd.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(WorkerLogsTest, StreamMasks) {
  EXPECT_EQ(*ParseStreamMask("3", 2), (std::vector<int>{3, 3}));
  EXPECT_EQ(*ParseStreamMask("0:1,2:3", 3), (std::vector<int>{1, 0, 3}));
  EXPECT_FALSE(ParseStreamMask("4", 1).ok());
  EXPECT_FALSE(ParseStreamMask("0:x", 1).ok());
  EXPECT_FALSE(ParseStreamMask("a", 1).ok());
}

TEST(WorkerLogsTest, TorchrunLayoutUnderLogDir) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/l/x";
  auto logs = WorkerLogs::Create(dir);
  ASSERT_TRUE(logs.ok()) << logs.status();
  ASSERT_TRUE(logs->PrepareAttempt(1, 2).ok());
  EXPECT_EQ(logs->ErrorFile(1, 0), dir + "/attempt_1/0/error.json");
  EXPECT_EQ(access((dir + "/attempt_1/1").c_str(), F_OK), 0);
}

TEST(WorkerLogsTest, TemporaryDirectoryIsRemoved) {
  std::string attempt_dir;
  {
    auto logs = WorkerLogs::Create("");
    ASSERT_TRUE(logs.ok());
    ASSERT_TRUE(logs->enabled());
    ASSERT_TRUE(logs->PrepareAttempt(0, 1).ok());
    attempt_dir = logs->AttemptDir(0, 0);
    EXPECT_EQ(access(attempt_dir.c_str(), F_OK), 0);
  }
  EXPECT_NE(access(attempt_dir.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace distjob
