#include "supervisor/exit_policy.h"

#include <sys/wait.h>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(ExitPolicyTest, DefaultClasses) {
  ExitPolicy policy;
  EXPECT_EQ(policy.Classify(0), ExitClass::kSuccess);
  for (int code = 1; code <= 127; ++code) {
    EXPECT_EQ(policy.Classify(code), ExitClass::kPermanent) << code;
  }
  for (int code = 128; code <= 255; ++code) {
    EXPECT_EQ(policy.Classify(code), ExitClass::kRetryable) << code;
  }
}

TEST(ExitPolicyTest, OverridesAndAnyFailurePolicy) {
  ExitPolicy policy;
  policy.permanent_overrides = {137};
  policy.retryable_overrides = {3};
  EXPECT_EQ(policy.Classify(137), ExitClass::kPermanent);
  EXPECT_EQ(policy.Classify(3), ExitClass::kRetryable);
  ExitPolicy any;
  any.restart_on_any_failure = true;
  EXPECT_EQ(any.Classify(1), ExitClass::kRetryable);
  EXPECT_EQ(any.Classify(0), ExitClass::kSuccess);
}

TEST(ExitPolicyTest, WaitStatusToExitCode) {
  EXPECT_EQ(ExitCodeFromWaitStatus(0), 0);
  EXPECT_EQ(ExitCodeFromWaitStatus(3 << 8), 3);
  EXPECT_EQ(ExitCodeFromWaitStatus(SIGKILL), 137);  // WIFSIGNALED form
}

TEST(ExitPolicyTest, ParsesCodeLists) {
  auto codes = ParseExitCodeList("1,10-12");
  ASSERT_TRUE(codes.ok());
  EXPECT_EQ(*codes, (std::set<int>{1, 10, 11, 12}));
  EXPECT_FALSE(ParseExitCodeList("0").ok());
  EXPECT_FALSE(ParseExitCodeList("256").ok());
  EXPECT_FALSE(ParseExitCodeList("5-2").ok());
  EXPECT_FALSE(ParseExitCodeList("x").ok());
}

}  // namespace
}  // namespace distjob
