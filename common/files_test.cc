#include "common/files.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(ReadSmallFileTest, ReadsUpToTheLimitAndNothingFromAMissingFile) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/small.txt";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string text(10000, 'x');
  std::fputs(text.c_str(), f);
  std::fclose(f);
  EXPECT_EQ(ReadSmallFile(path), text);
  EXPECT_EQ(ReadSmallFile(path, 5000), text.substr(0, 5000));
  EXPECT_EQ(ReadSmallFile(path + ".missing"), "");
}

}  // namespace
}  // namespace distjob
