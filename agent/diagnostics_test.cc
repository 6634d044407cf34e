#include "agent/diagnostics.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

class DiagnosticsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/diagnostics_testXXXXXX";
    dir_ = mkdtemp(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DiagnosticsTest, NoEvidenceWritesNoFile) {
  auto files = WorkerLogs::Create(dir_);
  ASSERT_TRUE(files.ok());
  auto path = WriteDiagnostics(GroupResult{}, *files, 0, 1);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, "");
}

TEST_F(DiagnosticsTest, TheFileHoldsTheEvidenceAndTheStderrTails) {
  auto files = WorkerLogs::Create(dir_);
  ASSERT_TRUE(files.ok());
  ASSERT_TRUE(files->PrepareAttempt(2, 1).ok());
  std::ofstream(files->AttemptDir(2, 0) + "/stderr_tail.log")
      << "Thread 0x7f (most recent call first):\n  File \"train.py\", "
         "line 9 in step\n";
  GroupResult group;
  Evidence evidence;
  evidence.reason = "local_rank 0 hung";
  WorkerEvidence worker;
  worker.local_rank = 0;
  worker.pid = 123;
  worker.processes.push_back(ProcessStates{123, {{123, "python3", 'S', "x"}}});
  worker.answers.emplace_back("fr_trace_json", "{\"entries\":[]}");
  evidence.workers.push_back(worker);
  group.evidence.push_back(evidence);
  group.unkillable = {0};

  auto path = WriteDiagnostics(group, *files, 2, 1);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir_ + "/attempt_2/diagnostics.json");
  std::stringstream text;
  text << std::ifstream(*path).rdbuf();
  auto json = ParseJson(text.str(), *path);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["attempt"], 2);
  EXPECT_EQ((*json)["collections"][0]["reason"], "local_rank 0 hung");
  EXPECT_EQ(
      (*json)["collections"][0]["workers"][0]["worker_server"]["fr_trace_json"],
      "{\"entries\":[]}");
  EXPECT_EQ((*json)["unkillable_local_ranks"][0], 0);
  EXPECT_NE(
      (*json)["stderr_tails"]["0"].get<std::string>().find("line 9 in step"),
      std::string::npos);
}

}  // namespace
}  // namespace distjob
