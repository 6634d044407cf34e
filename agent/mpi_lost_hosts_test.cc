#include "agent/mpi_lost_hosts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

class LostHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lost-hosts-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/lost-hosts";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  EnvMap Env() const { return {{kLostHostsFileVariable, path_}}; }
  std::string Text() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
  std::string path_;
};

TEST_F(LostHostsTest, EachHostIsReadOnceWithItsFirstReason) {
  ASSERT_TRUE(CreateLostHostsFile(path_).ok());
  RecordLostHost(Env(), "w-1.job", "Socket closed");
  RecordLostHost(Env(), "w-0.job", "no spawn server answers");
  RecordLostHost(Env(), "w-1.job", "a later reason");
  const std::vector<LostHost> lost = ReadLostHosts(path_);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].host, "w-1.job");
  EXPECT_EQ(lost[0].why, "Socket closed");
  EXPECT_EQ(lost[1].host, "w-0.job");
  EXPECT_EQ(DescribeLostHosts(lost),
            "w-1.job (Socket closed), w-0.job (no spawn server answers)");
}

TEST_F(LostHostsTest, ARefusedCallIsToldApart) {
  ASSERT_TRUE(CreateLostHostsFile(path_).ok());
  RecordLostHost(Env(), "w-0", "refused the token", /*refused=*/true);
  RecordLostHost(Env(), "w-1", "Socket closed");
  const std::vector<LostHost> lost = ReadLostHosts(path_);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_TRUE(lost[0].refused);
  EXPECT_EQ(lost[0].why, "refused the token");
  EXPECT_FALSE(lost[1].refused);
}

TEST_F(LostHostsTest, AReasonStaysOneRecordWhateverItHolds) {
  ASSERT_TRUE(CreateLostHostsFile(path_).ok());
  RecordLostHost(Env(), "w-0", "line one\nline\ttwo");
  const std::vector<LostHost> lost = ReadLostHosts(path_);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].host, "w-0");
  EXPECT_EQ(lost[0].why.find('\n'), std::string::npos);
  EXPECT_EQ(lost[0].why.find('\t'), std::string::npos);
}

TEST_F(LostHostsTest, NothingIsRecordedWithoutTheLaunchersFile) {
  RecordLostHost(Env(), "w-0", "gone");  // the file was never made
  EXPECT_NE(access(path_.c_str(), F_OK), 0);
  EXPECT_TRUE(ReadLostHosts(path_).empty());
  RecordLostHost({}, "w-0", "gone");  // no variable: a worker's rsh
  EXPECT_TRUE(ReadLostHosts(path_).empty());
}

TEST_F(LostHostsTest, AFifoInThePlaceOfTheFileDoesNotHoldRsh) {
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  RecordLostHost(Env(), "w-0", "gone");  // returns: no reader, no block
  EXPECT_TRUE(ReadLostHosts(path_).empty());
}

TEST_F(LostHostsTest, TheFileIsNeverMadeTwice) {
  ASSERT_TRUE(CreateLostHostsFile(path_).ok());
  const absl::Status again = CreateLostHostsFile(path_);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find(path_), std::string::npos);
}

TEST(DescribeLostHostsTest, ManyHostsAreCounted) {
  std::vector<LostHost> lost;
  for (int i = 0; i < 10; ++i) lost.push_back({"w-" + std::to_string(i), ""});
  EXPECT_EQ(DescribeLostHosts(lost, 2), "w-0, w-1 and 8 more");
}

}  // namespace
}  // namespace distjob
