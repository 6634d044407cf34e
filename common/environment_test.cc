#include "common/environment.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(EnvironmentTest, ParsesEnvpKeepingFirstDuplicateAndEmptyValues) {
  const char* envp[] = {"A=1", "B=", "A=2", "NOEQUALS", "C=x=y", nullptr};
  EnvMap env = EnvFromEnvp(envp);
  EXPECT_EQ(env.size(), 3u);
  EXPECT_EQ(env["A"], "1");
  EXPECT_EQ(Lookup(env, "B"), std::optional<std::string>(""));
  EXPECT_EQ(env["C"], "x=y");
  EXPECT_EQ(Lookup(env, "NOEQUALS"), std::nullopt);
}

TEST(EnvironmentTest, ToStringsIsSortedNameEqualsValue) {
  EnvMap env{{"Z", "1"}, {"A", "2"}};
  EXPECT_EQ(EnvToStrings(env), (std::vector<std::string>{"A=2", "Z=1"}));
}

TEST(EnvironmentTest, ExecStringsOverTheKernelLimitNameTheVariable) {
  EnvMap env{{"A", "1"}, {"TF_CONFIG", std::string(kMaxExecString, 'x')}};
  absl::Status s = CheckExecStrings(env, "environment");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("TF_CONFIG"), std::string::npos);
  EXPECT_NE(s.message().find("131072"), std::string::npos);
  // NAME=value and its NUL exactly at the limit still pass.
  env["TF_CONFIG"] = std::string(kMaxExecString - 11, 'x');
  EXPECT_TRUE(CheckExecStrings(env, "environment").ok());
}

}  // namespace
}  // namespace distjob
