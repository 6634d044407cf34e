#include "supervisor/failure_cause.h"

#include <csignal>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// Real tracebacks, as Debian's PyTorch 1.13 (gloo) and 2.x (NCCL) print
// them, with the lines around them that a worker's stderr also holds.
constexpr char kGlooPeerClosed[] =
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to "
    "[localhost]:29500 (errno: 111 - Connection refused).\n"
    "Traceback (most recent call last):\n"
    "  File \"/work/train.py\", line 41, in <module>\n"
    "    dist.all_reduce(t)\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/"
    "distributed_c10d.py\", line 1536, in all_reduce\n"
    "    work.wait()\n"
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
    "Connection closed by peer [127.0.0.1]:41772\n";

constexpr char kNcclAborted[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 12, in <module>\n"
    "    step()\n"
    "torch.distributed.DistBackendError: NCCL error in: "
    "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled "
    "system error (run with NCCL_DEBUG=INFO for details), NCCL version "
    "2.21.5\n"
    "ncclSystemError: System call (e.g. socket, malloc) or external library "
    "call failed or device error.\n";

constexpr char kKeyError[] =
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to "
    "[localhost]:29500 (errno: 111 - Connection refused).\n"
    "Traceback (most recent call last):\n"
    "  File \"/work/train.py\", line 30, in <module>\n"
    "    lr = config['lr']\n"
    "KeyError: 'lr'\n";

constexpr char kChained[] =
    "Traceback (most recent call last):\n"
    "  File \"a.py\", line 2, in <module>\n"
    "    {}['x']\n"
    "KeyError: 'x'\n"
    "\n"
    "During handling of the above exception, another exception occurred:\n"
    "\n"
    "Traceback (most recent call last):\n"
    "  File \"a.py\", line 4, in <module>\n"
    "    raise ConnectionResetError('peer went away')\n"
    "ConnectionResetError: peer went away\n";

constexpr char kDeviceAssert[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 9, in <module>\n"
    "    loss.item()\n"
    "RuntimeError: CUDA error: device-side assert triggered\n"
    "CUDA kernel errors might be asynchronously reported at some other API "
    "call, so the stacktrace below might be incorrect.\n";

constexpr char kEcc[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 9, in <module>\n"
    "    y = model(x)\n"
    "RuntimeError: CUDA error: uncorrectable ECC error encountered\n";

constexpr char kNoModule[] =
    "Traceback (most recent call last):\n"
    "  File \"/work/train.py\", line 1, in <module>\n"
    "    import torch\n"
    "ModuleNotFoundError: No module named 'torch'\n";

constexpr char kUnknown[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 3, in <module>\n"
    "    raise MyTrainerError('diverged')\n"
    "__main__.MyTrainerError: diverged\n";

constexpr char kWatchdogAbort[] =
    "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE) ran for 600000 "
    "milliseconds before timing out.\n"
    "terminate called after throwing an instance of 'std::runtime_error'\n";

FailureEvidence Python(const char* text) {
  FailureEvidence e;
  e.exit_code = 1;
  e.error_text = text;
  return e;
}

struct Case {
  const char* name;
  FailureEvidence evidence;
  bool restart;
  bool peer;
  const char* type;
  const char* rule_has;
};

class ClassifyAuto : public testing::TestWithParam<Case> {};

TEST_P(ClassifyAuto, DecidesByCause) {
  const Case& c = GetParam();
  const FailureCause cause = ClassifyFailure(c.evidence, CausePolicy());
  EXPECT_EQ(cause.restart, c.restart) << cause.rule;
  EXPECT_EQ(cause.peer_communication, c.peer) << cause.rule;
  if (c.peer) {
    EXPECT_TRUE(cause.infrastructure) << cause.rule;
  }
  EXPECT_EQ(cause.exception.type, c.type);
  EXPECT_NE(cause.rule.find(c.rule_has), std::string::npos) << cause.rule;
}

FailureEvidence Signal(int sig, const char* text = "") {
  FailureEvidence e;
  e.exit_code = 128 + sig;
  e.term_signal = sig;
  e.error_text = text;
  return e;
}

FailureEvidence Exit(int code, const char* text = "") {
  FailureEvidence e;
  e.exit_code = code;
  e.error_text = text;
  return e;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ClassifyAuto,
    testing::Values(
        Case{"gloo", Python(kGlooPeerClosed), true, true, "RuntimeError",
             "gloo communication error"},
        Case{"nccl", Python(kNcclAborted), true, true,
             "torch.distributed.DistBackendError", "NCCL"},
        Case{"key_error", Python(kKeyError), false, false, "KeyError",
             "KeyError is a programming error"},
        Case{"chained_last_wins", Python(kChained), true, true,
             "ConnectionResetError", "connection or timeout"},
        Case{"device_assert", Python(kDeviceAssert), false, false,
             "RuntimeError", "device-side assert"},
        Case{"ecc", Python(kEcc), true, false, "RuntimeError", "CUDA error"},
        Case{"no_module", Python(kNoModule), false, false,
             "ModuleNotFoundError", "programming error"},
        Case{"unknown", Python(kUnknown), true, false,
             "__main__.MyTrainerError", "not in the table"},
        Case{"sigkill", Signal(SIGKILL), true, false, "", "SIGKILL"},
        Case{"watchdog_abort", Signal(SIGABRT, kWatchdogAbort), true, true, "",
             "SIGABRT"},
        Case{"exit_3_no_text", Exit(3), false, false, "", "permanent"},
        Case{"exit_200", Exit(200), true, false, "", "retryable"}),
    [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ClassifyFailureTest, OverridesComeFirst) {
  CausePolicy policy;
  policy.permanent_exit_codes = {137};
  EXPECT_FALSE(ClassifyFailure(Signal(SIGKILL), policy).restart);
  policy.retryable_exit_codes = {1};
  const FailureCause cause = ClassifyFailure(Python(kKeyError), policy);
  EXPECT_TRUE(cause.restart);
  EXPECT_EQ(cause.rule, "exit code 1 is in --retryable-exit-codes");
}

TEST(ClassifyFailureTest, HangOomAndExecFailures) {
  FailureEvidence hang = Exit(0);
  hang.hang = true;
  EXPECT_TRUE(ClassifyFailure(hang, CausePolicy()).restart);
  FailureEvidence oom = Signal(SIGKILL);
  oom.oom = true;
  EXPECT_EQ(ClassifyFailure(oom, CausePolicy()).rule, "an OOM kill");
  FailureEvidence exec = Exit(127);
  exec.exec_failed = true;
  EXPECT_FALSE(ClassifyFailure(exec, CausePolicy()).restart);
}

TEST(ClassifyFailureTest, UserPatternMakesAnErrorRetryable) {
  CausePolicy policy;
  auto pattern = ErrorPattern::Compile("config\\['lr'\\]");
  ASSERT_TRUE(pattern.ok());
  policy.retryable_patterns.push_back(*pattern);
  const FailureCause cause = ClassifyFailure(Python(kKeyError), policy);
  EXPECT_TRUE(cause.restart);
  EXPECT_NE(cause.rule.find("--retryable-error-pattern"), std::string::npos);
}

TEST(ClassifyFailureTest, ABadPatternIsRefused) {
  auto pattern = ErrorPattern::Compile("(unclosed");
  ASSERT_FALSE(pattern.ok());
  EXPECT_NE(pattern.status().message().find("(unclosed"), std::string::npos);
}

TEST(ClassifyFailureTest, AnyRestartsEverythingClassesReadsTheCode) {
  CausePolicy any;
  any.policy = RestartPolicy::kAny;
  const FailureCause restarted = ClassifyFailure(Python(kKeyError), any);
  EXPECT_TRUE(restarted.restart);
  EXPECT_NE(restarted.rule.find("KeyError is a programming error"),
            std::string::npos);
  CausePolicy classes;
  classes.policy = RestartPolicy::kClasses;
  EXPECT_FALSE(ClassifyFailure(Python(kGlooPeerClosed), classes).restart);
  EXPECT_TRUE(ClassifyFailure(Signal(SIGKILL), classes).restart);
}

TEST(FindPythonExceptionTest, TakesTheExceptionAndItsLastFrames) {
  const PythonException e = FindPythonException(kGlooPeerClosed, 2);
  EXPECT_EQ(e.type, "RuntimeError");
  EXPECT_EQ(e.line.rfind("RuntimeError: [../third_party/gloo", 0), 0u);
  EXPECT_EQ(e.excerpt.find("File \"/usr/lib"), std::string::npos) << e.excerpt;
  EXPECT_NE(e.excerpt.find("work.wait()"), std::string::npos) << e.excerpt;
}

TEST(FindPythonExceptionTest, NoTracebackNoException) {
  EXPECT_TRUE(FindPythonException("Segmentation fault\n").type.empty());
  EXPECT_TRUE(FindPythonException("Traceback (most recent call last):\n"
                                  "  File \"x\"\n")
                  .type.empty());
}

TEST(RestartPolicyTest, ParsesItsThreeNames) {
  EXPECT_EQ(*ParseRestartPolicy("auto"), RestartPolicy::kAuto);
  EXPECT_EQ(*ParseRestartPolicy("any"), RestartPolicy::kAny);
  EXPECT_EQ(*ParseRestartPolicy("classes"), RestartPolicy::kClasses);
  EXPECT_FALSE(ParseRestartPolicy("sometimes").ok());
  EXPECT_STREQ(RestartPolicyName(RestartPolicy::kClasses), "classes");
}

}  // namespace
}  // namespace distjob
