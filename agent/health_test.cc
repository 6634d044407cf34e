#include "agent/health.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(HealthTest, StatesFollowTheSetters) {
  auto server = HealthServer::Start(0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto check = [port](const std::string& service) {
    auto status = CheckHealth("127.0.0.1", port, service, absl::Seconds(5));
    return status.ok() ? *status : status.status().ToString();
  };
  EXPECT_EQ(check("liveness"), "SERVING");
  EXPECT_EQ(check(""), "SERVING");
  EXPECT_EQ(check("readiness"), "NOT_SERVING");
  EXPECT_EQ(check("nope"), "NOT_FOUND");
  (*server)->SetReady(true);
  EXPECT_EQ(check("readiness"), "SERVING");
  (*server)->SetReady(false);
  EXPECT_EQ(check("readiness"), "NOT_SERVING");
  (*server)->Shutdown();
  EXPECT_FALSE(CheckHealth("127.0.0.1", port, "", absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace distjob
