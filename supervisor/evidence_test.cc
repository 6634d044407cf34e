#include "supervisor/evidence.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string FakeProcWithOneDThread() {
  char dir[] = "/tmp/evidence_testXXXXXX";
  const std::string root = mkdtemp(dir);
  for (const char* d :
       {"/4242", "/4242/task", "/4242/task/4242", "/4242/task/4243"}) {
    mkdir((root + d).c_str(), 0755);
  }
  std::ofstream(root + "/4242/task/4242/stat") << "4242 (python3) S 1";
  std::ofstream(root + "/4242/task/4242/wchan") << "futex_wait_queue";
  std::ofstream(root + "/4242/task/4243/stat") << "4243 (reader) D 1";
  std::ofstream(root + "/4242/task/4243/wchan") << "fuse_request_wait";
  return root;
}

TEST(EvidenceTest, ADStateWorkerIsReportedUnkillable) {
  const std::string root = FakeProcWithOneDThread();
  EvidenceOptions options;
  options.proc_root = root;
  const Evidence evidence =
      CollectEvidence({{1, 4242, ""}}, "local_rank 1 hung", options,
                      absl::Now() + absl::Seconds(5), true);
  EXPECT_EQ(UnkillableRanks(evidence), std::vector<int>{1});
  const std::vector<std::string> lines = SummarizeEvidence(evidence);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("thread 4243 uninterruptible sleep (D) in "
                          "fuse_request_wait"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("UNKILLABLE"), std::string::npos) << lines[0];
  const Json json = EvidenceToJson(evidence);
  EXPECT_EQ(json["reason"], "local_rank 1 hung");
  EXPECT_EQ(json["workers"][0]["processes"][0]["unkillable"], true);
  EXPECT_EQ(json["workers"][0]["processes"][0]["threads"][1]["state"], "D");
  std::filesystem::remove_all(root);
}

TEST(EvidenceTest, ASleepingWorkerIsNamedByItsMainThread) {
  const std::string root = FakeProcWithOneDThread();
  std::ofstream(root + "/4242/task/4243/stat") << "4243 (reader) S 1";
  EvidenceOptions options;
  options.proc_root = root;
  const Evidence evidence = CollectEvidence(
      {{0, 4242, ""}}, "x", options, absl::Now() + absl::Seconds(5), false);
  EXPECT_TRUE(UnkillableRanks(evidence).empty());
  EXPECT_NE(SummarizeEvidence(evidence)[0].find(
                "main thread sleeping (S) in futex_wait_queue"),
            std::string::npos)
      << SummarizeEvidence(evidence)[0];
  std::filesystem::remove_all(root);
}

TEST(EvidenceTest, AGoneWorkerIsSaidToBeGone) {
  EvidenceOptions options;
  options.proc_root = "/nonexistent";
  const Evidence evidence = CollectEvidence(
      {{3, 77, ""}}, "x", options, absl::Now() + absl::Seconds(1), true);
  EXPECT_NE(SummarizeEvidence(evidence)[0].find("already gone"),
            std::string::npos);
}

TEST(EvidenceTest, NothingIsAskedOfAPathThatIsNoSocket) {
  EvidenceOptions options;
  options.proc_root = "/nonexistent";
  const Evidence evidence =
      CollectEvidence({{0, 77, "/etc/hostname"}}, "x", options,
                      absl::Now() + absl::Seconds(1), true);
  EXPECT_TRUE(evidence.workers[0].answers.empty());
}

}  // namespace
}  // namespace distjob
