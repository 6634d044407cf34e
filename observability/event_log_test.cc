#include "observability/event_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(EventLogTest, HandlersAccepted) {
  EXPECT_TRUE(ValidateEventLogHandler("null").ok());
  EXPECT_TRUE(ValidateEventLogHandler("console").ok());
  EXPECT_TRUE(ValidateEventLogHandler("file:/tmp/x").ok());
  EXPECT_FALSE(ValidateEventLogHandler("file:").ok());
  EXPECT_FALSE(ValidateEventLogHandler("syslog").ok());
}

TEST(EventLogTest, FileGetsOneJsonObjectPerEventWithContext) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/events.jsonl";
  {
    EventLog log;
    ASSERT_TRUE(log.Open("file:" + path).ok());
    log.SetContext("job", "train");
    log.Emit("started");
    log.SetContext("round", 2);
    Json fields = Json::object();
    fields["exit_code"] = 3;
    log.Emit("worker_exited", fields);
  }
  const std::string text = ReadFile(path);
  std::istringstream lines(text);
  std::string line;
  std::vector<Json> events;
  while (std::getline(lines, line)) {
    auto parsed = ParseJson(line, "event line");
    ASSERT_TRUE(parsed.ok()) << line;
    events.push_back(*parsed);
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["event"], "started");
  EXPECT_EQ(events[0]["job"], "train");
  EXPECT_FALSE(events[0].contains("round"));
  EXPECT_EQ(events[1]["event"], "worker_exited");
  EXPECT_EQ(events[1]["round"], 2);
  EXPECT_EQ(events[1]["exit_code"], 3);
  EXPECT_THAT(events[1]["time"].get<std::string>(), HasSubstr("T"));
}

TEST(EventLogTest, UnopenableFileNamesTheFlagAndPath) {
  EventLog log;
  absl::Status opened = log.Open("file:/nonexistent-dir/events");
  EXPECT_TRUE(absl::IsInvalidArgument(opened));
  EXPECT_THAT(std::string(opened.message()),
              HasSubstr("--event-log-handler '/nonexistent-dir/events': "
                        "cannot open"));
}

// A FIFO nobody reads blocked the open (and one with a reader, the
// events): it is skipped with a warning, the run goes on.
TEST(EventLogTest, AFifoIsSkippedWithoutBlocking) {
  const std::string path = std::string(::testing::TempDir()) + "/events.fifo";
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EventLog log;
  EXPECT_TRUE(log.Open("file:" + path).ok());
  log.Emit("started", Json::object());  // writes nothing, blocks nothing
  unlink(path.c_str());
}

TEST(EventLogTest, NullWritesNothing) {
  EventLog log;
  ASSERT_TRUE(log.Open("null").ok());
  log.Emit("started");  // no crash, nowhere to write
}

}  // namespace
}  // namespace distjob
