#include "common/route_interface.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RouteInterfaceTest, LoopbackIsReachedThroughLo) {
  auto name = RouteInterface("127.0.0.1");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "lo");
  // Every 127/8 address is lo's, though only 127.0.0.1 is configured.
  name = RouteInterface("127.0.0.3");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "lo");
}

TEST(RouteInterfaceTest, ANameIsNoAddress) {
  auto name = RouteInterface("worker-0.job");
  EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(name.status().message().find("worker-0.job"), std::string::npos);
}

}  // namespace
}  // namespace distjob
