#include "launchers/worker_command.h"

#include <set>

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

namespace distjob {
namespace {

TEST(WorkerCommandTest, AsTorchrunEveryScriptRunsWithPython) {
  WorkerCommandOptions o;
  o.always_python = true;
  EXPECT_EQ(WorkerArgv({"train", "--x"}, o, 0),
            (std::vector<std::string>{"python3", "-u", "train", "--x"}));
  o.no_python = true;
  EXPECT_EQ(WorkerArgv({"train"}, o, 0), (std::vector<std::string>{"train"}));
}

TEST(WorkerCommandTest, LauncherCommands) {
  EXPECT_TRUE(IsLauncherCommand({"torchrun", "--nproc-per-node", "2", "t"}));
  EXPECT_TRUE(IsLauncherCommand({"/opt/conda/bin/torchrun", "t.py"}));
  EXPECT_TRUE(IsLauncherCommand(
      {"python3", "-u", "-m", "torch.distributed.run", "t.py"}));
  EXPECT_TRUE(IsLauncherCommand(
      {"bash", "-c", "torchrun --nproc-per-node 4 train.py"}));
  EXPECT_TRUE(IsLauncherCommand(
      {"/bin/sh", "-ec", "cd /w && exec env A=1 torchrun t.py"}));
  EXPECT_TRUE(IsLauncherCommand(
      {"bash", "-lc", "pip list; python -m torch.distributed.run t.py"}));
  EXPECT_FALSE(IsLauncherCommand({"python3", "train.py", "torchrun"}));
  EXPECT_FALSE(IsLauncherCommand({"bash", "-c", "echo torchrun.log"}));
  EXPECT_FALSE(IsLauncherCommand({"bash", "run_torchrun.sh"}));
  EXPECT_FALSE(IsLauncherCommand({"train.py"}));
  EXPECT_FALSE(IsLauncherCommand({}));
}

TEST(WorkerCommandTest, ResolveOnPathTakesTheFirstExecutableEntry) {
  auto only = [](std::set<std::string> files) {
    return [files](const std::string& p) { return files.count(p) > 0; };
  };
  EXPECT_EQ(ResolveOnPath("python3", "/venv/bin:/usr/bin",
                          only({"/usr/bin/python3", "/venv/bin/python3"})),
            "/venv/bin/python3");
  EXPECT_EQ(ResolveOnPath("python3", "/venv/bin:/usr/bin",
                          only({"/usr/bin/python3"})),
            "/usr/bin/python3");
  EXPECT_EQ(ResolveOnPath("python3", "/a:/b", only({})), "");
  EXPECT_EQ(ResolveOnPath("/opt/py/bin/python", "/usr/bin", only({})),
            "/opt/py/bin/python");
  EXPECT_EQ(ResolveOnPath("", "/usr/bin", only({})), "");
  EXPECT_EQ(ResolveOnPath("sh", "/bin:/usr/bin"), "/bin/sh");
}

TEST(WorkerCommandTest, InterpreterHintNamesPythonExecForAMissingTorch) {
  const std::string traceback =
      "Traceback (most recent call last):\n"
      "  File \"/w/train.py\", line 1, in <module>\n"
      "    import torch\n"
      "ModuleNotFoundError: No module named 'torch'\n";
  const std::string hint = InterpreterHint(traceback, "/usr/bin/python3");
  EXPECT_NE(hint.find("/usr/bin/python3"), std::string::npos) << hint;
  EXPECT_NE(hint.find("PYTHON_EXEC"), std::string::npos) << hint;
  EXPECT_NE(InterpreterHint("No module named 'torch.distributed'", "p"), "");
  EXPECT_EQ(InterpreterHint("ModuleNotFoundError: No module named 'lr'", "p"),
            "");
  EXPECT_EQ(InterpreterHint("No module named 'torchvision'", "p"), "");
  EXPECT_EQ(InterpreterHint("KeyError: 'torch'", "p"), "");
}

}  // namespace
}  // namespace distjob
