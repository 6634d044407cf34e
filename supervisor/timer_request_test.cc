#include "supervisor/timer_request.h"

#include <csignal>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// What torch 1.13's FileTimerRequest.to_json writes (json.dumps' spacing).
TEST(TimerRequestTest, ParsesTorchsAcquire) {
  auto r = ParseTimerRequest(
      R"({"version": 1, "pid": 4242, "scope_id": "train.py#17", )"
      R"("expiration_time": 1700000000.25, "signal": 9})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pid, 4242);
  EXPECT_EQ(r->scope_id, "train.py#17");
  EXPECT_FALSE(r->release);
  EXPECT_EQ(r->expiration, absl::FromUnixMillis(1700000000250));
  EXPECT_EQ(r->signal, SIGKILL);
}

TEST(TimerRequestTest, MinusOneIsARelease) {
  auto r = ParseTimerRequest(
      R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": -1, )"
      R"("signal": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->release);
  EXPECT_EQ(r->signal, 0);
}

TEST(TimerRequestTest, ZeroOrNegativeSignalIsKeptForTheLogOnly) {
  auto r = ParseTimerRequest(
      R"({"version":1,"pid":7,"scope_id":"s","expiration_time":5,"signal":-3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->signal, -3);
}

TEST(TimerRequestTest, RefusesWhatIsNotARequest) {
  const char* bad[] = {
      "",
      "junk",
      "[1,2]",
      R"({"pid":7,"scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":2,"pid":7,"scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":0,"scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":-1,"scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":1.5,"scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":"7","scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":99999999999,"scope_id":"s","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":7,"scope_id":"","expiration_time":5,"signal":9})",
      R"({"version":1,"pid":7,"scope_id":3,"expiration_time":5,"signal":9})",
      R"({"version":1,"pid":7,"scope_id":"s","expiration_time":"5","signal":9})",
      R"({"version":1,"pid":7,"scope_id":"s","signal":9})",
      R"({"version":1,"pid":7,"scope_id":"s","expiration_time":5})",
      R"({"version":1,"pid":7,"scope_id":"s","expiration_time":5,"signal":999})",
  };
  for (const char* line : bad) {
    auto r = ParseTimerRequest(line);
    EXPECT_FALSE(r.ok()) << line;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(r.status().message().find("FileTimer request"),
                std::string::npos);
    }
  }
}

TEST(TimerRequestTest, RefusesALineOverTheLimit) {
  const std::string scope(kMaxTimerRequestBytes, 'x');
  auto r = ParseTimerRequest(R"({"version":1,"pid":7,"scope_id":")" + scope +
                             R"(","expiration_time":5,"signal":9})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("4096"), std::string::npos) << r.status();
}

TEST(TimerRequestTest, AFarFutureExpirationDoesNotOverflow) {
  auto r = ParseTimerRequest(
      R"({"version":1,"pid":7,"scope_id":"s","expiration_time":1e300,"signal":9})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->expiration, absl::Now() + absl::Hours(24 * 365 * 100));
}

}  // namespace
}  // namespace distjob
