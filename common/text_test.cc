#include "common/text.h"

#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(QuoteForMessageTest, OneLineAndCut) {
  EXPECT_EQ(QuoteForMessage("a\nb"), "'a\\nb'");
  const std::string big(100 * 1024, 'x');
  const std::string quoted = QuoteForMessage(big);
  EXPECT_LT(quoted.size(), 120u);
  EXPECT_NE(quoted.find("(102400 bytes)"), std::string::npos);
}

TEST(OneLineTest, EscapesControlBytesKeepsTextAndCuts) {
  EXPECT_EQ(OneLine(std::string("a\nb\0c\x1b", 6)), "a\\nb\\x00c\\x1b");
  EXPECT_EQ(OneLine("caf\xc3\xa9 ok"), "caf\xc3\xa9 ok");
  const std::string line = OneLine(std::string(100 * 1024, 'y'));
  EXPECT_LT(line.size(), 2100u);
  EXPECT_NE(line.find("(102400 bytes)"), std::string::npos);
}

}  // namespace
}  // namespace distjob
