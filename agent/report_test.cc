#include "agent/report.h"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/json.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(ReportTest, Utf8TruncateNeverSplitsASequence) {
  const std::string euro = "\xE2\x82\xAC";  // 3 bytes
  EXPECT_EQ(Utf8Truncate(euro + euro, 5), euro);
  EXPECT_EQ(Utf8Truncate("ab\xFF"
                         "c",
                         10),
            "ab\xEF\xBF\xBD"
            "c");
  EXPECT_EQ(Utf8Truncate("abc", 2), "ab");
}

// Lead and continuation bytes that look right are not enough: a surrogate
// (U+D800), an overlong '/' and a code point beyond U+10FFFF are not UTF-8
// and must not reach the termination message.
TEST(ReportTest, TerminationMessageReplacesEveryInvalidSequence) {
  RunReport r;
  r.outcome = "failed";
  r.exit_code = 1;
  r.detail =
      "a\xED\xA0\x80"
      "b\xE0\x80\xAF"
      "c\xF0\x80\x80\xAF"
      "d\xF4\x90\x80\x80"
      "e";
  const std::string message = FormatTerminationMessage(r);
  EXPECT_EQ(ValidUtf8(message), message);
  EXPECT_NE(message.find("a\xEF\xBF\xBD"), std::string::npos) << message;
  EXPECT_EQ(message.find("\xED\xA0\x80"), std::string::npos) << message;
  EXPECT_EQ(message.find("\xF4\x90"), std::string::npos) << message;
  EXPECT_NE(message.find("e\n"), std::string::npos) << message;
}

// Another node ended the job: its reason is the only root cause this pod's
// message can name.
TEST(ReportTest, DetailFollowsTheSummaryLine) {
  RunReport r;
  r.outcome = "rendezvous";
  r.exit_code = 138;
  r.detail = "the job ended: node w-0 exited: permanent exit_code=1";
  EXPECT_EQ(FormatTerminationMessage(r),
            "distjob-agent: rendezvous exit_code=138 restarts=0/0 oom=false "
            "hang=false\nthe job ended: node w-0 exited: permanent "
            "exit_code=1\n");
}

TEST(ReportTest, StoppedWhileWaitingNamesTheSignalAndTheWait) {
  EXPECT_EQ(StoppedWhileWaiting(SIGTERM, "the exit barrier of round 2"),
            "stopped by SIGTERM while waiting for the exit barrier of round 2");
  // A wait's own Cancelled message is not repeated.
  EXPECT_EQ(StoppedWhileWaiting(
                SIGINT, "stopped while waiting for the peers' DNS names (1/2)"),
            "stopped by SIGINT while waiting for the peers' DNS names (1/2)");
  EXPECT_EQ(StoppedWhileWaiting(SIGHUP, ""), "stopped by SIGHUP");
}

TEST(ReportTest, MessageIsBoundedAndKeepsTheTail) {
  const std::string error_file = TempPath("big_error.json");
  std::ofstream(error_file)
      << "{\"message\": {\"message\": \"" << std::string(10000, 'x') << "\u20ac"
      << "THE END\", \"extraInfo\": {}}}";
  RunReport report;
  report.outcome = "permanent";
  report.exit_code = 1;
  report.root_cause = RootCause{};
  report.root_cause->exit_code = 1;
  report.root_cause->error_file = error_file;
  const std::string message = FormatTerminationMessage(report);
  EXPECT_LE(message.size(), kTerminationMessageLimit);
  EXPECT_EQ(message.rfind("distjob-agent: permanent exit_code=1 restarts=0/0 "
                          "oom=false hang=false\n",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("THE END"), std::string::npos);
  EXPECT_EQ(Utf8Truncate(message, message.size()), message);
}

TEST(ReportTest, ErrorFileAddsErrorCodeToWorkerJson) {
  const std::string worker = TempPath("worker_error.json");
  const std::string agent = TempPath("agent_error.json");
  std::ofstream(worker) << R"({"message": {"message": "ValueError: boom",
      "extraInfo": {"py_callstack": "Traceback", "timestamp": "1"}}})";
  RootCause cause;
  cause.exit_code = 139;
  cause.error_file = worker;
  ASSERT_TRUE(WriteRootCauseErrorFile(agent, cause).ok());
  const std::string json = Slurp(agent);
  EXPECT_NE(json.find("\"errorCode\":139"), std::string::npos) << json;
  EXPECT_NE(json.find("ValueError: boom"), std::string::npos) << json;
  EXPECT_EQ(ReadWorkerErrorMessage(agent), "ValueError: boom\nTraceback");
}

TEST(ReportTest, ErrorFileSynthesisedForASignalDeath) {
  const std::string agent = TempPath("agent_error2.json");
  RootCause cause;
  cause.pid = 42;
  cause.exit_code = 137;
  cause.term_signal = 9;
  cause.error_file = TempPath("does_not_exist.json");
  ASSERT_TRUE(WriteRootCauseErrorFile(agent, cause).ok());
  const std::string json = Slurp(agent);
  EXPECT_NE(json.find("Signal 9 (SIGKILL) received by PID 42"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"errorCode\":137"), std::string::npos) << json;
}

// A worker's message with bytes that are not UTF-8 is kept, and the file
// is still JSON that torchelastic and kubectl can read.
TEST(ReportTest, ErrorFileIsValidJsonForInvalidUtf8FromTheWorker) {
  const std::string worker = TempPath("worker_error_bytes.json");
  const std::string agent = TempPath("agent_error_bytes.json");
  std::ofstream(worker)
      << "{\"message\": {\"message\": \"bad \xff\xfe \xc0\xaf "
         "\xed\xa0\x80 \xf4\x90\x80\x80 end\", \"extraInfo\": "
         "{\"py_callstack\": \"tb\"}}}";
  RootCause cause;
  cause.exit_code = 1;
  cause.error_file = worker;
  ASSERT_TRUE(WriteRootCauseErrorFile(agent, cause).ok());
  auto parsed = ParseJson(Slurp(agent), agent);
  ASSERT_TRUE(parsed.ok()) << Slurp(agent);
  const std::string message = (*parsed)["message"]["message"];
  EXPECT_EQ(message.rfind("bad \xef\xbf\xbd", 0), 0u) << message;
  EXPECT_NE(message.find(" end"), std::string::npos) << message;
  EXPECT_EQ((*parsed)["message"]["errorCode"], 1);
}

TEST(ReportTest, ErrorFileIsValidJsonForInvalidUtf8InTheReason) {
  const std::string agent = TempPath("agent_error_reason.json");
  RootCause cause;
  cause.exit_code = 127;
  cause.reason = "cannot execute '\xff\xfe': No such file or directory";
  ASSERT_TRUE(WriteRootCauseErrorFile(agent, cause).ok());
  auto parsed = ParseJson(Slurp(agent), agent);
  ASSERT_TRUE(parsed.ok()) << Slurp(agent);
  EXPECT_EQ((*parsed)["message"]["message"],
            "cannot execute '\xef\xbf\xbd\xef\xbf\xbd': No such file or "
            "directory");
  EXPECT_EQ((*parsed)["message"]["extraInfo"]["py_callstack"], "");
}

TEST(ReportTest, UnwritablePathIsAnErrorNamingIt) {
  absl::Status s = WriteTerminationMessage("/nonexistent/dir/log", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/dir/log"), std::string::npos);
}

// The exit must never wait on a FIFO, read or not.
TEST(ReportTest, AFifoIsRefusedWithoutBlockingTheExit) {
  const std::string path = TempPath("termination.fifo");
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  absl::Status s = WriteTerminationMessage(path, "x");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("--termination-log"), std::string::npos) << s;
  RootCause cause;
  cause.exit_code = 1;
  s = WriteRootCauseErrorFile(path, cause);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("--error-file"), std::string::npos) << s;
  unlink(path.c_str());
}

}  // namespace
}  // namespace distjob
