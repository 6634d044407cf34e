#include "common/logging.h"

#include <string>

#include "common/json.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(LoggingTest, ParseLogFormat) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml").ok());
}

TEST(LoggingTest, JsonLinesCarryTheContextAndStayValid) {
  InitLogging(LogLevel::kInfo, LogFormat::kJson);
  SetLogContext("job", "train");
  SetLogContext("round", 3);
  testing::internal::CaptureStderr();
  DJ_LOG_WARNING("worker said \"{}\"", "bad \xff byte\nnext");
  DJ_LOG_DEBUG("not shown at info");
  const std::string out = testing::internal::GetCapturedStderr();
  InitLogging(LogLevel::kInfo, LogFormat::kText);
  ASSERT_EQ(out.find('\n'), out.size() - 1) << out;  // one line
  auto line = ParseJson(out, "log line");
  ASSERT_TRUE(line.ok()) << out;
  EXPECT_EQ((*line)["level"], "warning");
  EXPECT_EQ((*line)["message"], "worker said \"bad \xEF\xBF\xBD byte\nnext\"");
  EXPECT_EQ((*line)["job"], "train");
  EXPECT_EQ((*line)["round"], 3);
  EXPECT_TRUE(line->contains("time"));
  EXPECT_TRUE(line->contains("pid"));
}

}  // namespace
}  // namespace distjob
