#include "agent/run_preflight.h"

#include <string>
#include <vector>

#include "agent/cli/run_flags.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

PreflightOptions ChecksOf(const std::vector<std::string>& args) {
  auto options = ParseRunOptions(args, {});
  EXPECT_TRUE(options.ok()) << options.status();
  auto checks = RunPreflightChecks(*options, {});
  EXPECT_TRUE(checks.ok()) << checks.status();
  return *checks;
}

TEST(RunPreflightTest, NamesAreTheMasterAndThePeersOnce) {
  const PreflightOptions checks =
      ChecksOf({"--preflight", "--master-addr", "m0", "--peers",
                "worker=m0,w1;ps=w1,p0", "--check-path", "/data", "x"});
  EXPECT_EQ(checks.names, (std::vector<std::string>{"m0", "w1", "p0"}));
  EXPECT_EQ(checks.paths, std::vector<std::string>{"/data"});
}

TEST(RunPreflightTest, ReachesOnlyAStoreAnotherNodeHosts) {
  const std::vector<std::string> c10d = {"--preflight", "--rdzv-backend",
                                         "c10d", "--nnodes", "1:2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = c10d;
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("x");
    return ChecksOf(args).rdzv_endpoint;
  };
  EXPECT_EQ(with({"--rdzv-endpoint", "store.invalid:29400"}),
            "store.invalid:29400");
  EXPECT_EQ(with({"--rdzv-endpoint", "store.invalid:29400", "--rdzv-conf",
                  "is_host=true"}),
            "");
  EXPECT_EQ(with({"--rdzv-endpoint", "127.0.0.1:29400"}), "");
  EXPECT_EQ(with({"--rdzv-endpoint", "127.0.0.1:29400", "--rdzv-conf",
                  "is_host=false"}),
            "127.0.0.1:29400");
  EXPECT_EQ(ChecksOf({"--preflight", "--master-addr", "m0", "x"}).rdzv_endpoint,
            "");  // static: no store to reach before it starts
}

TEST(RunPreflightTest, NothingWithoutPreflight) {
  auto options = ParseRunOptions({"x"}, {});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(PreflightBeforeRun(*options, {}), std::nullopt);
}

}  // namespace
}  // namespace distjob
