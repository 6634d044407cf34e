#include "agent/completion.h"

#include <cstdio>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(CompletionTest, OptionsInHelpWithBothSpellings) {
  const std::string help =
      "Usage: x\n\nOptions:\n"
      "  --nproc-per-node N|cpu\n      Workers --not-this one.\n"
      "  -m, --module\n      Module.\n"
      "  -h, --help\n      Show this help.\n";
  EXPECT_EQ(OptionsInHelp(help),
            (std::vector<std::string>{"--nproc-per-node", "--nproc_per_node",
                                      "--module", "--help"}));
}

TEST(CompletionTest, ScriptsPerShell) {
  std::vector<CompletedCommand> commands = {{"run", {"--nnodes"}},
                                            {"install", {"--dir"}}};
  auto bash = CompletionScript("bash", commands);
  ASSERT_TRUE(bash.ok());
  EXPECT_NE(bash->find("run) opts='--nnodes' ;;"), std::string::npos);
  EXPECT_NE(bash->find("complete -o default -F _distjob_agent distjob-agent "
                       "torchrun"),
            std::string::npos);
  EXPECT_NE(CompletionScript("zsh", commands)->find("bashcompinit"),
            std::string::npos);
  EXPECT_NE(CompletionScript("tcsh", commands)->find("'p/1/(run install)/'"),
            std::string::npos);
  auto fish = CompletionScript("fish", commands);
  ASSERT_FALSE(fish.ok());
  EXPECT_EQ(fish.status().message(), "'fish' is not one of bash, zsh, tcsh");
}

TEST(CompletionTest, CaptureStdout) {
  EXPECT_EQ(CaptureStdout([] { std::fputs("help text\n", stdout); }),
            "help text\n");
}

}  // namespace
}  // namespace distjob
