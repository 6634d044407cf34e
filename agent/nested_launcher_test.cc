#include "agent/nested_launcher.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

using Words = std::vector<std::string>;

TEST(NestedLauncherTest, OptionsBeforeTheCommandAreNamedWithoutValues) {
  const Words args = {
      "--nproc-per-node", "4",  "--max_restarts=3", "-r",       "0:1",
      "--standalone",     "--", "torchrun",         "--nnodes", "2",
      "train.py"};
  EXPECT_EQ(
      OptionsBeforeCommand(args, 4),
      (Words{"--nproc-per-node", "--max_restarts", "-r", "--standalone"}));
}

TEST(NestedLauncherTest, ValuesThatLookLikeOptionsAreNot) {
  // A negative number and a template starting with '-' are values.
  const Words args = {
      "--max-restarts", "-1",       "--log-line-prefix-template",
      "-[${rank}]",     "torchrun", "train.py"};
  EXPECT_EQ(OptionsBeforeCommand(args, 2),
            (Words{"--max-restarts", "--log-line-prefix-template"}));
}

TEST(NestedLauncherTest, NoOptionsNothingDropped) {
  EXPECT_EQ(OptionsBeforeCommand({"--", "torchrun", "x.py"}, 2), Words{});
  EXPECT_EQ(OptionsBeforeCommand({"torchrun", "--nnodes", "2"}, 3), Words{});
  EXPECT_EQ(OptionsBeforeCommand({"torchrun"}, 5), Words{});
}

}  // namespace
}  // namespace distjob
