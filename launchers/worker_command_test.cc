#include "launchers/worker_command.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

using Argv = std::vector<std::string>;

TEST(WorkerArgvTest, PythonScriptRunsUnbuffered) {
  EXPECT_EQ(WorkerArgv({"train.py", "--lr", "0.1"}, {}, 0),
            (Argv{"python3", "-u", "train.py", "--lr", "0.1"}));
}

TEST(WorkerArgvTest, ModuleAndCustomInterpreter) {
  WorkerCommandOptions o;
  o.module = true;
  o.python = "/usr/bin/python3";
  EXPECT_EQ(WorkerArgv({"pkg.train", "x"}, o, 0),
            (Argv{"/usr/bin/python3", "-u", "-m", "pkg.train", "x"}));
}

TEST(WorkerArgvTest, BinariesAndNoPythonRunAsGiven) {
  EXPECT_EQ(WorkerArgv({"sh", "-c", "echo $RANK"}, {}, 0),
            (Argv{"sh", "-c", "echo $RANK"}));
  WorkerCommandOptions o;
  o.no_python = true;
  EXPECT_EQ(WorkerArgv({"run.py"}, o, 0), (Argv{"run.py"}));
}

TEST(WorkerArgvTest, SubstitutesLocalRankMacro) {
  EXPECT_EQ(WorkerArgv({"bin", "--out=log.${local_rank}"}, {}, 3),
            (Argv{"bin", "--out=log.3"}));
}

}  // namespace
}  // namespace distjob
