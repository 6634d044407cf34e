#include "agent/install.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string TempDir() {
  std::string pattern = std::string(std::getenv("TEST_TMPDIR") != nullptr
                                        ? std::getenv("TEST_TMPDIR")
                                        : "/tmp") +
                        "/install_test.XXXXXX";
  return mkdtemp(pattern.data());
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(InstallAgentTest, CopiesExecutableAndCreatesTorchrunLink) {
  const std::string root = TempDir();
  const std::string source = root + "/source";
  std::ofstream(source) << "#!/bin/sh\necho agent\n";
  const std::string dir = root + "/shared";

  ASSERT_TRUE(InstallAgent(source, dir).ok());
  // Twice: an init container that restarts must not fail on its own output.
  ASSERT_TRUE(InstallAgent(source, dir).ok());

  EXPECT_EQ(Slurp(dir + "/distjob-agent"), "#!/bin/sh\necho agent\n");
  struct stat st;
  ASSERT_EQ(stat((dir + "/distjob-agent").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  char link[64] = {};
  ASSERT_GT(readlink((dir + "/torchrun").c_str(), link, sizeof(link) - 1), 0);
  EXPECT_STREQ(link, "distjob-agent");
}

// The copy's file opened blocking would wait forever for a FIFO's reader.
TEST(InstallAgentTest, AFifoWhereTheCopyGoesIsRefusedWithoutBlocking) {
  const std::string root = TempDir();
  const std::string source = root + "/source";
  std::ofstream(source) << "#!/bin/sh\n";
  const std::string dir = root + "/shared";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(mkfifo((dir + "/distjob-agent.tmp").c_str(), 0600), 0);
  absl::Status status = InstallAgent(source, dir);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("FIFO"), std::string::npos) << status;
}

TEST(InstallAgentTest, MissingSourceNamesThePath) {
  const std::string root = TempDir();
  absl::Status status = InstallAgent(root + "/nope", root + "/shared");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(root + "/nope"), std::string::npos);
}

TEST(InstallAgentTest, EmptyDirIsInvalidArgument) {
  EXPECT_EQ(InstallAgent("/proc/self/exe", "").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

TEST(InstallAgentTest, ReplacesATorchrunInPlaceKeepingTheOriginal) {
  const std::string root = TempDir();
  const std::string source = root + "/source";
  std::ofstream(source) << "agent\n";
  mkdir((root + "/conda").c_str(), 0755);
  const std::string torchrun = root + "/conda/torchrun";
  std::ofstream(torchrun) << "#!/usr/bin/python\n# pytorch's\n";
  ASSERT_TRUE(ReplaceTorchrun(source, torchrun).ok());
  char target[64] = {};
  ASSERT_GT(readlink(torchrun.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_STREQ(target, "distjob-agent");
  EXPECT_EQ(Slurp(root + "/conda/distjob-agent"), "agent\n");
  EXPECT_EQ(Slurp(torchrun + ".pytorch"), "#!/usr/bin/python\n# pytorch's\n");
  // Again: the link is replaced, the kept original stays.
  ASSERT_TRUE(ReplaceTorchrun(source, torchrun).ok());
  EXPECT_EQ(Slurp(torchrun + ".pytorch"), "#!/usr/bin/python\n# pytorch's\n");
  auto bad = ReplaceTorchrun(source, root + "/conda/python");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace distjob
