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
