#include "agent/cli/supervisor_flags.h"

#include "agent/cli/run_flags.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(SupervisorFlagsTest, Defaults) {
  auto o = ParseRunOptions({"x"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->outcome.restart_backoff, absl::ZeroDuration());
  EXPECT_FALSE(o->outcome.restart_policy.has_value());
  EXPECT_TRUE(o->outcome.retryable_error_patterns.empty());
  EXPECT_TRUE(o->outcome.permanent_exit_codes.empty());
  EXPECT_EQ(o->outcome.health_port, 0);
  EXPECT_EQ(o->outcome.error_file, "");
  EXPECT_EQ(o->outcome.termination_log, "/dev/termination-log");
}

TEST(SupervisorFlagsTest, RestartPolicyAndOverrides) {
  auto o = ParseRunOptions(
      {"--restart-policy", "any", "--permanent-exit-codes", "139,200-201",
       "--retryable_exit_codes=1", "--restart-backoff", "1.5", "x"},
      {{"DISTJOB_HEALTH_PORT", "8081"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->outcome.restart_policy, RestartPolicy::kAny);
  EXPECT_EQ(o->outcome.permanent_exit_codes, (std::set<int>{139, 200, 201}));
  EXPECT_EQ(o->outcome.retryable_exit_codes, std::set<int>{1});
  EXPECT_EQ(o->outcome.restart_backoff, absl::Milliseconds(1500));
  EXPECT_EQ(o->outcome.health_port, 8081);
}

TEST(SupervisorFlagsTest, RetryableErrorPatternsRepeat) {
  auto o = ParseRunOptions({"--retryable-error-pattern", "NCCL timeout",
                            "--retryable-error-pattern=Xid [0-9]+", "x"},
                           {});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->outcome.retryable_error_patterns.size(), 2u);
  EXPECT_EQ(o->outcome.retryable_error_patterns[1].pattern(), "Xid [0-9]+");
  EXPECT_TRUE(o->outcome.retryable_error_patterns[1].Matches("GPU Xid 79"));
}

TEST(SupervisorFlagsTest, ErrorFileDefaultsFromTorchelasticVariable) {
  auto o = ParseRunOptions({"x"}, {{"TORCHELASTIC_ERROR_FILE", "/e.json"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->outcome.error_file, "/e.json");
}

TEST(SupervisorFlagsTest, FileTimerOffByDefaultEvenWithAPath) {
  auto o = ParseRunOptions({"x"}, {{"TORCHELASTIC_TIMER_FILE", "/tmp/t"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->supervisor.file_timer);
  EXPECT_EQ(o->supervisor.file_timer_path, "");
}

TEST(SupervisorFlagsTest, FileTimerFromTorchelasticVariables) {
  auto o = ParseRunOptions({"x"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                                   {"TORCHELASTIC_TIMER_FILE", "/tmp/t"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->supervisor.file_timer);
  EXPECT_EQ(o->supervisor.file_timer_path, "/tmp/t");
}

TEST(SupervisorFlagsTest, FileTimerPathDefaultsToAFreshNameInTmpdir) {
  auto o = ParseRunOptions({"--file-timer", "x"}, {{"TMPDIR", "/tmp"}});
  ASSERT_TRUE(o.ok()) << o.status();
  const std::string& path = o->supervisor.file_timer_path;
  ASSERT_EQ(path.rfind("/tmp/watchdog_timer_", 0), 0u) << path;
  EXPECT_EQ(path.size(), std::string("/tmp/watchdog_timer_").size() + 36)
      << path;
  auto again = ParseRunOptions({"--file-timer", "x"}, {{"TMPDIR", "/tmp"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->supervisor.file_timer_path, path);
}

TEST(SupervisorFlagsTest, FileTimerBadValuesNameTheirSource) {
  auto bad = ParseRunOptions(
      {"x"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "yes please"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TORCHELASTIC_ENABLE_FILE_TIMER"),
            std::string::npos)
      << bad.status();
  auto nodir = ParseRunOptions(
      {"--file-timer", "--file-timer-path", "/nonexistent-dir/t", "x"}, {});
  ASSERT_FALSE(nodir.ok());
  EXPECT_EQ(nodir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nodir.status().message().find("--file-timer-path"),
            std::string::npos)
      << nodir.status();
}

TEST(SupervisorFlagsTest, BadValuesNameTheFlag) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--restart-policy", "sometimes", "x"},
           {"--retryable-error-pattern", "(unclosed", "x"},
           {"--permanent-exit-codes", "0", "x"},
           {"--restart-backoff", "-1", "x"},
           {"--health-port", "70000", "x"}}) {
    auto o = ParseRunOptions(args, {});
    ASSERT_FALSE(o.ok()) << args[0];
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(args[0].substr(2)),
              absl::string_view::npos)
        << o.status();
  }
}

}  // namespace
}  // namespace distjob
