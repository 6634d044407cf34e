#include "agent/rsh_args.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RshArgsTest, IgnoresSshOptionsAndJoinsTheCommandAsSshDoes) {
  auto a = ParseRshArgs({"-x", "-q", "-T", "-p", "22", "-o",
                         "ConnectTimeout=10", "-l", "mpiuser", "w-1.job",
                         "orted", "-mca", "ess", "\"env\""});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "w-1.job");
  EXPECT_EQ(a->command, "orted -mca ess \"env\"");
  EXPECT_EQ(a->ignored,
            (std::vector<std::string>{"-x", "-q", "-T", "-p 22",
                                      "-o ConnectTimeout=10", "-l mpiuser"}));
}

TEST(RshArgsTest, GroupedFlagsAndAttachedValuesAsGetopt) {
  auto a = ParseRshArgs({"-xqp2222", "root@10.0.0.7", "hostname"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "10.0.0.7");
  EXPECT_EQ(a->command, "hostname");
  EXPECT_EQ(a->ignored, (std::vector<std::string>{"-x", "-q", "-p 2222"}));
}

TEST(RshArgsTest, OptionsEndAtTheHostAndAtDoubleDash) {
  auto a = ParseRshArgs({"--", "-weird-host", "echo", "-x"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "-weird-host");
  EXPECT_EQ(a->command, "echo -x");
  a = ParseRshArgs({"h", "ls", "-l"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->command, "ls -l");
  EXPECT_TRUE(a->ignored.empty());
}

TEST(RshArgsTest, BadInputNamesTheProblem) {
  auto a = ParseRshArgs({"-Z", "h", "ls"});
  EXPECT_NE(a.status().message().find("unknown option -Z"), std::string::npos)
      << a.status();
  a = ParseRshArgs({"-p"});
  EXPECT_NE(a.status().message().find("-p needs a value"), std::string::npos);
  a = ParseRshArgs({"-x"});
  EXPECT_NE(a.status().message().find("expected HOST"), std::string::npos);
  a = ParseRshArgs({"host"});
  EXPECT_NE(a.status().message().find("expected a COMMAND"), std::string::npos);
  a = ParseRshArgs({"user@", "ls"});
  EXPECT_NE(a.status().message().find("names no host"), std::string::npos);
  EXPECT_FALSE(ParseRshArgs({}).ok());
}

}  // namespace
}  // namespace distjob
