#include "agent/exit_codes.h"

#include <csignal>

#include "agent/cli/subcommand_flags.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(ExitCodesTest, InternalErrorIsPermanentAndNotAShellOrWorkerCode) {
  // 1..127 is the permanent class (supervisor/exit_policy.h).
  EXPECT_GE(kExitInternalError, 3);
  EXPECT_LT(kExitInternalError, kExitNotExecutable);
  EXPECT_NE(kExitInternalError, kExitBadConfig);
}

TEST(ExitCodesTest, AFlagErrorOfASubcommandIsBadConfig) {
  // agent/cli/ cannot include this package: it repeats the code.
  EXPECT_EQ(kExitUsage, kExitBadConfig);
}

TEST(ExitCodesTest, SignalCodesAreShellConvention) {
  EXPECT_EQ(ExitCodeForSignal(SIGTERM), 143);
  EXPECT_EQ(ExitCodeForSignal(SIGINT), 130);
}

TEST(ExitCodesTest, ConfigurationErrorsAreBadConfig) {
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("--nnodes")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("peers file")), 2);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::PermissionDeniedError("log dir")), 2);
  EXPECT_EQ(ExitCodeFor(absl::OutOfRangeError("port")), 2);
  EXPECT_EQ(ExitCodeFor(absl::AlreadyExistsError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::UnauthenticatedError("x")), 2);
}

TEST(ExitCodesTest, UnreachablePeersAreRetryable) {
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("store")), 138);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("join_timeout")), 138);
  EXPECT_EQ(ExitCodeFor(absl::AbortedError("node b ended the job")), 138);
}

TEST(ExitCodesTest, EverythingElseIsInternal) {
  EXPECT_EQ(ExitCodeFor(absl::InternalError("c-ares")), 70);
  EXPECT_EQ(ExitCodeFor(absl::UnknownError("?")), 70);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("fork")), 70);
  EXPECT_EQ(ExitCodeFor(absl::UnimplementedError("x")), 70);
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("x")), 70);
  // A stop signal's Cancelled is the caller's to map: one that reaches
  // here is unexpected.
  EXPECT_EQ(ExitCodeFor(absl::CancelledError("x")), 70);
}

TEST(ExitCodesTest, OkIsSuccess) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
}

}  // namespace
}  // namespace distjob
