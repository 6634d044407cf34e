#include "agent/version.h"

#include <string>

#include "agent/build_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(VersionTest, NamesTheReleaseCommitAndBothProtocols) {
  const std::string text = VersionText();
  EXPECT_THAT(
      text, StartsWith(std::string("distjob-agent ") + BuildVersion() + "\n"));
  EXPECT_THAT(text, HasSubstr(std::string("commit: ") + BuildCommit() + "\n"));
  EXPECT_THAT(text, HasSubstr("rendezvous protocol: 1 "));
  EXPECT_THAT(text, HasSubstr("workers' store protocol: PyTorch TCPStore"));
  EXPECT_THAT(text, HasSubstr("0x3C85F7CE"));
}

TEST(VersionTest, TheStampIsAVersionAndACommitOrUnknown) {
  EXPECT_THAT(BuildVersion(), ContainsRegex("^[0-9]+\\.[0-9]+\\.[0-9]+$"));
  EXPECT_THAT(BuildCommit(),
              ContainsRegex("^([0-9a-f]{7,40}(-dirty)?|unknown)$"));
}

}  // namespace
}  // namespace distjob
