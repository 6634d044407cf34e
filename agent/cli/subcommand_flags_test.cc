#include "agent/cli/subcommand_flags.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

FlagSet Flags(std::string* name) {
  FlagSet flags("Usage: test");
  Flag f;
  f.names = {"the-name"};
  f.metavar = "N";
  f.set = SetString(name);
  flags.Add(std::move(f));
  return flags;
}

TEST(HelpRequestedTest, AnywhereBeforeDoubleDash) {
  EXPECT_TRUE(HelpRequested({"--help"}));
  EXPECT_TRUE(HelpRequested({"--the-name", "x", "-h"}));
  EXPECT_TRUE(HelpRequested({"/dir", "--help"}));
  EXPECT_FALSE(HelpRequested({"--", "--help"}));
  EXPECT_FALSE(HelpRequested({"--the-name", "x"}));
}

TEST(ParseSubcommandFlagsTest, BothSpellingsAndInlineValues) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--the-name", "v"}, {"--the_name=v"}, {"--the-name=v"}}) {
    std::string name;
    std::vector<std::string> positional;
    EXPECT_EQ(ParseSubcommandFlags("t", Flags(&name), args, {}, 0, &positional),
              std::nullopt);
    EXPECT_EQ(name, "v");
  }
}

TEST(ParseSubcommandFlagsTest, HelpIsExitZero) {
  std::string name;
  std::vector<std::string> positional;
  EXPECT_EQ(
      ParseSubcommandFlags("t", Flags(&name), {"--help"}, {}, 0, &positional),
      0);
}

TEST(ParseSubcommandFlagsTest, UnknownFlagAndExtraArgumentsAreUsageErrors) {
  std::string name;
  std::vector<std::string> positional;
  EXPECT_EQ(
      ParseSubcommandFlags("t", Flags(&name), {"--nope"}, {}, 0, &positional),
      kExitUsage);
  EXPECT_EQ(
      ParseSubcommandFlags("t", Flags(&name), {"a", "b"}, {}, 1, &positional),
      kExitUsage);
  EXPECT_EQ(ParseSubcommandFlags("t", Flags(&name), {"a"}, {}, 1, &positional),
            std::nullopt);
  EXPECT_EQ(positional, std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace distjob
