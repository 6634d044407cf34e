#include "supervisor/worker_logs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

// mkdir's EEXIST answered for a file too: the run went on, warning once
// per worker file, and exited 0 without logs.
TEST(WorkerLogsTest, ALogDirThatIsNotADirectoryIsRefused) {
  const std::string base = std::getenv("TEST_TMPDIR");
  const std::string file = base + "/not-a-dir";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const std::string fifo = base + "/a-fifo";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& dir : {file, fifo, file + "/below"}) {
    auto logs = WorkerLogs::Create(dir);
    ASSERT_FALSE(logs.ok()) << dir;
    EXPECT_EQ(logs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(logs.status().message().find("--log-dir"), std::string::npos);
    EXPECT_NE(logs.status().message().find(dir.substr(0, file.size())),
              std::string::npos)
        << logs.status();
  }
}

// A worker can put a FIFO where the next attempt's log goes: opening it
// for writing blocked the agent (no reader) with its signals held.
TEST(WorkerLogsTest, AFifoAtAWorkersLogPathFailsAtOnce) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/fifo";
  auto logs = WorkerLogs::Create(dir);
  ASSERT_TRUE(logs.ok()) << logs.status();
  ASSERT_TRUE(logs->PrepareAttempt(1, 1).ok());
  for (const char* name : {"/stdout.log", "/stderr.log"}) {
    const std::string path = logs->AttemptDir(1, 0) + name;
    unlink(path.c_str());
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  }
  StreamPlan plan;
  plan.redirect = 3;
  auto streams = logs->OpenStreams(1, 0, plan, LinePolicy{}, LinePolicy{});
  ASSERT_FALSE(streams.ok());
  EXPECT_NE(streams.status().message().find("--log-dir"), std::string::npos)
      << streams.status();
  EXPECT_NE(streams.status().message().find("stdout.log"), std::string::npos)
      << streams.status();
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
