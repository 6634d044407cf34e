// The agent loop's decisions, driven through its seams: a scripted
// supervisor (no process is started) and a scripted rendezvous.
#include "agent/agent_loop.h"

#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "agent/exit_codes.h"
#include "agent/peer_failure.h"
#include "gtest/gtest.h"
#include "rendezvous/fake_rendezvous.h"
#include "supervisor/fake_supervisor.h"

namespace distjob {
namespace {

// An elastic backend that forgets the multi-node methods cannot be built:
// it has no failure claim that silently wins.
struct OnlyNext : ElasticRendezvous {
  absl::StatusOr<RendezvousResult> Next(int) override {
    return RendezvousResult();
  }
};
static_assert(std::is_abstract<OnlyNext>::value,
              "ElasticRendezvous must leave its methods pure virtual");

// A round that closes at once, or (`blocks`) a Next that waits for its
// peers until it is cancelled.
class WaitingRendezvous : public Rendezvous {
 public:
  explicit WaitingRendezvous(bool blocks) : blocks_(blocks) {}
  absl::StatusOr<RendezvousResult> Next(int) override {
    if (!blocks_) return FakeRound(0);
    cancelled_.WaitForNotification();
    return absl::CancelledError("the rendezvous was cancelled");
  }
  std::string WaitingFor() override {
    return blocks_ ? "the rendezvous round 0 (1/2 nodes joined)" : "";
  }
  void Cancel() override {
    if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
  }

 private:
  const bool blocks_;
  absl::Notification cancelled_;
};

class AgentLoopTest : public ::testing::Test {
 protected:
  AgentLoopTest() {
    termination_log_ = ::testing::TempDir() + "/agent-loop-termination-log";
    std::remove(termination_log_.c_str());
    options_.outcome.termination_log = termination_log_;
    // Nothing of this machine is discovered.
    options_.discovery.volcano_dir = ::testing::TempDir() + "/no-volcano";
    options_.command = {"train"};
    options_.launch.no_python = true;
    options_.launch.nproc = 1;
  }

  // Every failure claim the loop made was scripted.
  void TearDown() override { EXPECT_EQ(rdzv_.claim_overruns, 0); }

  int Run() {
    AgentDeps deps;
    deps.make_supervisor = [this](const SupervisorOptions&)
        -> absl::StatusOr<std::unique_ptr<SupervisorInterface>> {
      if (!supervisor_error_.ok()) return supervisor_error_;
      return std::make_unique<FakeSupervisor>(&supervisor_);
    };
    deps.make_rendezvous = [this](const RunOptions&,
                                  std::shared_ptr<WorkerStoreHost>)
        -> absl::StatusOr<std::unique_ptr<Rendezvous>> {
      if (!rendezvous_error_.ok()) return rendezvous_error_;
      if (waiting_.has_value()) {
        return std::make_unique<WaitingRendezvous>(*waiting_);
      }
      if (elastic_) return std::make_unique<FakeElasticRendezvous>(&rdzv_);
      return std::make_unique<FakeRendezvous>(&rdzv_);
    };
    return RunAgentWith(options_, EnvMap(), std::move(deps));
  }

  std::string TerminationMessage() const {
    std::ifstream in(termination_log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // TORCHELASTIC_RESTART_COUNT of attempt `attempt`'s first worker.
  std::string RestartCountOf(size_t attempt) const {
    const auto& env = supervisor_.groups_run.at(attempt).at(0).process.env;
    auto it = env.find("TORCHELASTIC_RESTART_COUNT");
    return it == env.end() ? "<unset>" : it->second;
  }

  void Fail(int exit_code, std::function<void()> during = nullptr) {
    supervisor_.groups.push_back({FailedGroup(exit_code), std::move(during)});
  }
  void Then(GroupOutcome outcome, std::function<void()> during = nullptr) {
    supervisor_.groups.push_back({GroupWith(outcome), std::move(during)});
  }
  // A failure of local rank 0 in attempt `attempt` whose stderr ends with
  // `text` (options_.launch.log_dir must be set).
  void FailWithStderr(int exit_code, int attempt, const std::string& text) {
    const std::string path = options_.launch.log_dir + "/attempt_" +
                             std::to_string(attempt) + "/0/stderr_tail.log";
    Fail(exit_code, [path, text] { std::ofstream(path) << text; });
  }
  void UseLogDir(const std::string& name) {
    options_.launch.log_dir = ::testing::TempDir() + "/" + name;
  }
  void Rounds(int count) {
    for (int i = 0; i < count; ++i) rdzv_.rounds.push_back(FakeRound(i));
  }

  RunOptions options_;
  std::string termination_log_;
  FakeSupervisorScript supervisor_;
  FakeRendezvousScript rdzv_;
  bool elastic_ = true;
  std::optional<bool> waiting_;  // set: a WaitingRendezvous, blocking or not
  absl::Status supervisor_error_;
  absl::Status rendezvous_error_;
};

TEST_F(AgentLoopTest, MembershipChangeInterruptsAndReformsWithoutRestart) {
  Rounds(2);
  Then(GroupOutcome::kInterrupted, [this] { rdzv_.FireMembershipChange(); });
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(supervisor_.interrupts, 1);
  EXPECT_EQ(rdzv_.next_calls, 2);
  EXPECT_TRUE(rdzv_.noted_restarts.empty());
  EXPECT_TRUE(supervisor_.sleeps.empty());
  EXPECT_EQ(RestartCountOf(1), "0");
  EXPECT_EQ(rdzv_.shutdown, true);
}

TEST_F(AgentLoopTest, FailureAfterMembershipChangeIsDeferredToTheNextRound) {
  // Exit 1 is permanent: had this node owned the failure, the job would
  // have ended with it.
  Rounds(2);
  rdzv_.claims = {true};
  Fail(1, [this] { rdzv_.FireMembershipChange(); });
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(rdzv_.next_calls, 2);
  EXPECT_TRUE(rdzv_.noted_restarts.empty());
  EXPECT_EQ(RestartCountOf(1), "0");
}

TEST_F(AgentLoopTest, LostClaimFollowsTheDecidersRound) {
  options_.launch.max_restarts = 3;
  rdzv_.rounds = {FakeRound(0), FakeRound(1, /*restart_count=*/1)};
  rdzv_.claims = {false};
  Fail(1);
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(rdzv_.claim_calls, 1);
  // The decider counts the restart; this node takes it from the round.
  EXPECT_TRUE(rdzv_.noted_restarts.empty());
  EXPECT_EQ(RestartCountOf(1), "1");
}

TEST_F(AgentLoopTest, LostClaimThenJobEndedReportsThisNodesOwnFailure) {
  rdzv_.rounds = {FakeRound(0),
                  absl::AbortedError("node b ended the job: permanent")};
  rdzv_.claims = {false};
  Fail(3);
  EXPECT_EQ(Run(), 3);
  const std::string message = TerminationMessage();
  EXPECT_EQ(message.rfind("distjob-agent: permanent exit_code=3", 0), 0)
      << message;
  EXPECT_NE(message.find("node b ended the job"), std::string::npos) << message;
  EXPECT_NE(message.find("root cause: local_rank=0"), std::string::npos)
      << message;
  EXPECT_EQ(rdzv_.shutdown, false);
  ASSERT_EQ(rdzv_.end_reasons.size(), 1u);
  EXPECT_NE(rdzv_.end_reasons[0].find("exit_code=3"), std::string::npos);
}

TEST_F(AgentLoopTest, RendezvousErrorWithoutOwnFailureIsUnavailable) {
  rdzv_.rounds = {absl::AbortedError("node b ended the job")};
  EXPECT_EQ(Run(), kExitRendezvousUnavailable);
  EXPECT_EQ(TerminationMessage().rfind("distjob-agent: rendezvous", 0), 0);
}

TEST_F(AgentLoopTest, RefusedTokenIsBadConfigNotUnavailable) {
  rdzv_.rounds = {absl::UnauthenticatedError(
      "the rendezvous store at h:1 requires a token")};
  EXPECT_EQ(Run(), kExitBadConfig);
  EXPECT_NE(TerminationMessage().find("requires a token"), std::string::npos);
}

TEST_F(AgentLoopTest, BackoffDoublesUpToTheMaximum) {
  options_.launch.max_restarts = 10;
  options_.outcome.restart_backoff = absl::Seconds(1);
  options_.outcome.restart_backoff_max = absl::Seconds(3);
  Rounds(5);
  rdzv_.claims = {true, true, true, true};
  for (int i = 0; i < 4; ++i) Fail(137);
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(supervisor_.sleeps,
            (std::vector<absl::Duration>{absl::Seconds(1), absl::Seconds(2),
                                         absl::Seconds(3), absl::Seconds(3)}));
  EXPECT_EQ(rdzv_.noted_restarts, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(RestartCountOf(4), "4");
}

TEST_F(AgentLoopTest, StopSignalDuringBackoffEndsWithItsCode) {
  options_.launch.max_restarts = 10;
  options_.outcome.restart_backoff = absl::Seconds(1);
  Rounds(2);
  rdzv_.claims = {true, true};
  Fail(137);
  Fail(137);
  supervisor_.stop_in_sleep = 1;
  supervisor_.stop_signal_number = SIGINT;
  EXPECT_EQ(Run(), 128 + SIGINT);
  EXPECT_EQ(supervisor_.groups_run.size(), 2u);  // no further attempt
  EXPECT_EQ(
      TerminationMessage().rfind("distjob-agent: stopped exit_code=130", 0), 0)
      << TerminationMessage();
  EXPECT_EQ(supervisor_.drains, 1);
}

TEST_F(AgentLoopTest, StopSignalCancelsTheRendezvousWait) {
  waiting_ = true;
  supervisor_.stop_signal = SIGTERM;
  EXPECT_EQ(Run(), 128 + SIGTERM);
  EXPECT_TRUE(supervisor_.groups_run.empty());
  EXPECT_NE(TerminationMessage().find(
                "stopped by SIGTERM while waiting for the rendezvous round 0 "
                "(1/2 nodes joined)"),
            std::string::npos)
      << TerminationMessage();
}

TEST_F(AgentLoopTest, NoWorkerStartsAfterAStopSignal) {
  // The round closed although the signal came first: nothing is started
  // only to be stopped.
  waiting_ = false;
  supervisor_.stop_signal = SIGTERM;
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 128 + SIGTERM);
  EXPECT_TRUE(supervisor_.groups_run.empty());
  EXPECT_NE(TerminationMessage().find("stopped by SIGTERM"), std::string::npos)
      << TerminationMessage();
}

TEST_F(AgentLoopTest, RetryableFailuresRestartUpToMaxRestarts) {
  options_.launch.max_restarts = 2;
  Rounds(3);
  rdzv_.claims = {true, true, true};
  for (int i = 0; i < 3; ++i) Fail(137);
  EXPECT_EQ(Run(), 137);
  EXPECT_EQ(supervisor_.groups_run.size(), 3u);
  EXPECT_EQ(rdzv_.noted_restarts, (std::vector<int>{1, 2}));
  EXPECT_EQ(TerminationMessage().rfind("distjob-agent: retryable exit_code=137 "
                                       "restarts=2/2",
                                       0),
            0)
      << TerminationMessage();
}

TEST_F(AgentLoopTest, HangIsClaimedOnceTheGroupHasStopped) {
  options_.launch.max_restarts = 1;
  Rounds(2);
  rdzv_.claims = {true};
  GroupResult hung = FailedGroup(0);  // exited 0 on the watchdog's SIGTERM
  hung.hang = true;
  supervisor_.groups.push_back({hung, nullptr});
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(rdzv_.claim_calls, 1);
  EXPECT_EQ(rdzv_.noted_restarts, (std::vector<int>{1}));
}

TEST_F(AgentLoopTest, PermanentCodeEndsWithoutRestart) {
  options_.launch.max_restarts = 5;
  Rounds(2);
  rdzv_.claims = {true};
  Fail(3);
  EXPECT_EQ(Run(), 3);
  EXPECT_EQ(supervisor_.groups_run.size(), 1u);
  EXPECT_TRUE(rdzv_.noted_restarts.empty());
  EXPECT_TRUE(supervisor_.sleeps.empty());
}

TEST_F(AgentLoopTest, FixedRoundDecidesItsFailureAlone) {
  elastic_ = false;
  options_.launch.max_restarts = 1;
  Rounds(2);
  Fail(137);
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(supervisor_.groups_run.size(), 2u);
  EXPECT_EQ(RestartCountOf(1), "1");
  EXPECT_FALSE(rdzv_.on_change);  // nothing to watch
  EXPECT_EQ(rdzv_.claim_calls, 0);
}

TEST_F(AgentLoopTest, SupervisionThatCannotStartIsAnInternalError) {
  supervisor_error_ = absl::InternalError("signalfd: out of descriptors");
  EXPECT_EQ(Run(), kExitInternalError);
  EXPECT_EQ(TerminationMessage().rfind("distjob-agent: error exit_code=70", 0),
            0)
      << TerminationMessage();
}

TEST_F(AgentLoopTest, WorkersThatCannotStartAreAnInternalError) {
  Rounds(1);  // and no group scripted: RunGroup fails
  EXPECT_EQ(Run(), kExitInternalError);
}

// Descriptors that ran out when the restart starts its workers must not
// turn the worker's retryable failure into the agent's own 70.
TEST_F(AgentLoopTest, ARestartThatCannotStartKeepsTheFailuresCode) {
  elastic_ = false;
  options_.launch.max_restarts = 1;
  Rounds(2);
  Fail(137);  // and no second group scripted: the restart's RunGroup fails
  EXPECT_EQ(Run(), 137);
  const std::string message = TerminationMessage();
  EXPECT_EQ(message.rfind("distjob-agent: retryable exit_code=137", 0), 0)
      << message;
  EXPECT_NE(message.find("the restart could not start the workers"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("root cause: local_rank=0"), std::string::npos)
      << message;
}

TEST_F(AgentLoopTest, RendezvousSetUpErrorsMapToTheirClass) {
  rendezvous_error_ = absl::InvalidArgumentError("--rdzv-conf: bad");
  EXPECT_EQ(Run(), kExitBadConfig);
  rendezvous_error_ = absl::UnavailableError("cannot bind the store");
  EXPECT_EQ(Run(), kExitRendezvousUnavailable);
}

constexpr char kKeyError[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 30, in <module>\n"
    "    lr = config['lr']\n"
    "KeyError: 'lr'\n";
constexpr char kGlooClosed[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 41, in <module>\n"
    "    dist.all_reduce(t)\n"
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
    "Connection closed by peer [127.0.0.1]:41772\n";
constexpr char kNcclAborted[] =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 12, in <module>\n"
    "    step()\n"
    "RuntimeError: NCCL communicator was aborted on rank 1.\n";

TEST_F(AgentLoopTest, ProgrammingErrorStopsAtOnceNamingTheRule) {
  UseLogDir("programming-error");
  elastic_ = false;
  options_.launch.max_restarts = 3;
  Rounds(2);
  FailWithStderr(1, 0, kKeyError);
  EXPECT_EQ(Run(), 1);
  EXPECT_EQ(supervisor_.groups_run.size(), 1u);
  const std::string message = TerminationMessage();
  EXPECT_NE(message.find("exception: KeyError: 'lr'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("KeyError is a programming error: not restarting"),
            std::string::npos)
      << message;
}

TEST_F(AgentLoopTest, AnyRestartsEveryFailureAsTorchrun) {
  UseLogDir("any");
  elastic_ = false;
  options_.launch.max_restarts = 1;
  options_.outcome.restart_policy = RestartPolicy::kAny;
  Rounds(2);
  FailWithStderr(1, 0, kKeyError);
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(supervisor_.groups_run.size(), 2u);
}

TEST_F(AgentLoopTest, InvokedAsTorchrunTheDefaultIsAny) {
  UseLogDir("as-torchrun");
  elastic_ = false;
  options_.launch.max_restarts = 2;
  options_.launch.as_torchrun = true;
  Rounds(2);
  FailWithStderr(1, 0, kKeyError);
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(RestartCountOf(1), "1");
}

TEST_F(AgentLoopTest, PeerLostWhileDecidingIsAConsequenceNotARestart) {
  UseLogDir("peer-lost");
  elastic_ = true;
  options_.launch.max_restarts = 3;
  rdzv_.peer_loss_window = absl::Seconds(30);
  rdzv_.rounds = {FakeRound(0), FakeRound(1)};
  rdzv_.claims = {true};
  FailWithStderr(1, 0, kGlooClosed);
  Then(GroupOutcome::kSucceeded);
  // The peer's lease runs out while the agent waits: after its claim won.
  supervisor_.on_sleep = [this](int index) {
    if (index == 2) rdzv_.FireMembershipChange();
  };
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(supervisor_.groups_run.size(), 2u);
  EXPECT_TRUE(rdzv_.noted_restarts.empty());
  EXPECT_EQ(RestartCountOf(1), "0");
}

TEST_F(AgentLoopTest, NoPeerLostWithinTheWindowIsThisNodesFailure) {
  UseLogDir("no-peer-lost");
  elastic_ = true;
  options_.launch.max_restarts = 3;
  rdzv_.peer_loss_window = absl::Milliseconds(50);
  rdzv_.rounds = {FakeRound(0), FakeRound(1, 1)};
  rdzv_.claims = {true};
  FailWithStderr(1, 0, kGlooClosed);
  Then(GroupOutcome::kSucceeded);
  EXPECT_EQ(Run(), 0);
  EXPECT_EQ(rdzv_.noted_restarts, (std::vector<int>{1}));
}

TEST_F(AgentLoopTest, ProgrammingErrorIsNotHeldForAPeerLoss) {
  UseLogDir("programming-no-window");
  elastic_ = true;
  options_.launch.max_restarts = 3;
  rdzv_.peer_loss_window = absl::Seconds(600);
  rdzv_.rounds = {FakeRound(0)};
  rdzv_.claims = {true};
  FailWithStderr(1, 0, kKeyError);
  EXPECT_EQ(Run(), 1);
  EXPECT_TRUE(supervisor_.sleeps.empty());
}

// The race the e2e suite meets: the failing worker's gloo peer on this
// node failed (and this node claimed the round) before the failing node
// saw its worker exit. That node offers its ValueError: the job ends with
// it, as it would have had its claim won, instead of restarting.
TEST_F(AgentLoopTest, CollateralClaimDecidesOnTheOfferedRootCause) {
  UseLogDir("offered-root-cause");
  options_.launch.max_restarts = 3;
  rdzv_.peer_loss_window = absl::Seconds(600);
  rdzv_.rounds = {FakeRound(0)};
  rdzv_.claims = {true};
  FailureReport offered;
  offered.rank = 3;
  offered.host = "pod-b";
  offered.exit.local_rank = 1;
  offered.exit_code = 1;
  offered.cause.rule = "ValueError is a programming error";
  offered.cause.exception.line = "ValueError: loss is NaN";
  offered.cause.exception.excerpt = "Traceback\nValueError: loss is NaN";
  // Offered while this node waits for a lost peer.
  supervisor_.on_sleep = [this, offered](int index) {
    if (index == 1) rdzv_.offered_failure = EncodeOfferedFailure(offered);
  };
  FailWithStderr(1, 0, kGlooClosed);
  EXPECT_EQ(Run(), 1);
  EXPECT_EQ(supervisor_.groups_run.size(), 1u);
  EXPECT_TRUE(rdzv_.noted_restarts.empty());
  const std::string message = TerminationMessage();
  EXPECT_EQ(message.rfind("distjob-agent: permanent exit_code=1", 0), 0)
      << message;
  EXPECT_NE(message.find("rank=3 host=pod-b"), std::string::npos) << message;
  EXPECT_NE(message.find("ValueError: loss is NaN"), std::string::npos)
      << message;
  EXPECT_NE(message.find("on host pod-b) failed"), std::string::npos)
      << message;
  EXPECT_EQ(rdzv_.offers, 0);  // the decider offers nothing
}

TEST_F(AgentLoopTest, LostClaimOffersAFailureThatIsNotCollateral) {
  UseLogDir("offers-key-error");
  rdzv_.rounds = {FakeRound(0), absl::AbortedError("node b ended the job")};
  rdzv_.claims = {false};
  FailWithStderr(1, 0, kKeyError);
  EXPECT_EQ(Run(), 1);
  ASSERT_TRUE(rdzv_.offered_failure.has_value());
  absl::StatusOr<FailureReport> offered =
      DecodeOfferedFailure(*rdzv_.offered_failure);
  ASSERT_TRUE(offered.ok()) << offered.status();
  EXPECT_EQ(offered->cause.exception.line, "KeyError: 'lr'");
  EXPECT_FALSE(offered->cause.restart);
}

TEST_F(AgentLoopTest, LostClaimOffersACommunicationErrorBesideTheRootCause) {
  UseLogDir("offers-collateral");
  rdzv_.rounds = {FakeRound(0), absl::AbortedError("node b ended the job")};
  rdzv_.claims = {false};
  FailWithStderr(1, 0, kGlooClosed);
  Run();
  EXPECT_EQ(rdzv_.offers, 1);
  EXPECT_FALSE(rdzv_.offered_failure.has_value());
  ASSERT_TRUE(rdzv_.offered_communication_error.has_value());
  absl::StatusOr<FailureReport> offered =
      DecodeOfferedFailure(*rdzv_.offered_communication_error);
  ASSERT_TRUE(offered.ok()) << offered.status();
  EXPECT_TRUE(offered->cause.peer_communication);
}

// The race the e2e suite met: rank 1's NCCL error (a communication error)
// repeats, but this time rank 0's gloo error won the claim. Rank 1's node
// offers its error beside the root cause: seen again, it stops the job,
// as it would have had rank 1's node won.
TEST_F(AgentLoopTest, ARepeatOfferedBesideTheClaimStopsTheJob) {
  UseLogDir("collateral-repeat");
  elastic_ = true;
  options_.launch.max_restarts = 3;
  rdzv_.peer_loss_window = absl::Milliseconds(50);
  rdzv_.rounds = {FakeRound(1, 1), FakeRound(2, 2)};
  rdzv_.claims = {true};
  FailureReport nccl;
  nccl.rank = 1;
  nccl.host = "pod-b";
  nccl.exit_code = 1;
  nccl.cause.restart = true;
  nccl.cause.peer_communication = true;
  nccl.cause.exception.line =
      "RuntimeError: NCCL communicator was aborted on rank 1.";
  nccl.signature = absl::StrCat("rank 1 ", nccl.cause.exception.line);
  // Recorded by rank 1's node, which decided the round before.
  rdzv_.root_cause = nccl.signature;
  rdzv_.offered_communication_error = EncodeOfferedFailure(nccl);
  FailWithStderr(1, 1, kGlooClosed);
  EXPECT_EQ(Run(), 1);
  EXPECT_EQ(supervisor_.groups_run.size(), 1u);
  const std::string message = TerminationMessage();
  EXPECT_NE(message.find("the same root cause"), std::string::npos) << message;
  EXPECT_NE(message.find("rank=1 host=pod-b"), std::string::npos) << message;
  // Both signatures recorded: either seen next counts.
  EXPECT_NE(rdzv_.root_cause.find(nccl.signature), std::string::npos);
  EXPECT_NE(rdzv_.root_cause.find("rank 0 RuntimeError"), std::string::npos)
      << rdzv_.root_cause;
}

TEST_F(AgentLoopTest, SameRootCauseTwiceInARowStops) {
  UseLogDir("same-twice");
  elastic_ = true;
  options_.launch.max_restarts = 5;
  rdzv_.rounds = {FakeRound(0), FakeRound(1, 1), FakeRound(2, 2)};
  rdzv_.claims = {true, true};
  FailWithStderr(1, 0, kNcclAborted);
  FailWithStderr(1, 1, kNcclAborted);
  EXPECT_EQ(Run(), 1);
  EXPECT_EQ(supervisor_.groups_run.size(), 2u);
  EXPECT_EQ(rdzv_.root_cause,
            "rank 0 RuntimeError: NCCL communicator was "
            "aborted on rank 1.");
  EXPECT_NE(TerminationMessage().find("the same root cause"),
            std::string::npos);
}

TEST_F(AgentLoopTest, InfrastructureFailuresThatSpendTheBudgetAreRetryable) {
  UseLogDir("budget-spent");
  elastic_ = false;
  options_.launch.max_restarts = 1;
  Rounds(2);
  FailWithStderr(1, 0, kNcclAborted);
  FailWithStderr(1, 1, kGlooClosed);
  EXPECT_EQ(Run(), kExitRetryElsewhere);
  EXPECT_NE(TerminationMessage().find("restarts are spent"), std::string::npos);
}

TEST_F(AgentLoopTest, FollowerOfAnEndedJobExitsWithTheJobsCode) {
  UseLogDir("follower");
  elastic_ = true;
  rdzv_.rounds = {FakeRound(0),
                  absl::AbortedError("the job ended: node b exited: "
                                     "distjob-agent: permanent exit_code=1 "
                                     "restarts=0/3 oom=false hang=false")};
  rdzv_.claims = {false};
  FailWithStderr(1, 0, kGlooClosed);
  EXPECT_EQ(Run(), 1);
  EXPECT_NE(TerminationMessage().find("node b exited"), std::string::npos);
}

TEST_F(AgentLoopTest, APythonWithoutTorchIsToldToSetPythonExec) {
  UseLogDir("no-torch");
  elastic_ = false;
  Rounds(1);
  FailWithStderr(1, 0,
                 "Traceback (most recent call last):\n"
                 "  File \"train.py\", line 1, in <module>\n"
                 "    import torch\n"
                 "ModuleNotFoundError: No module named 'torch'\n");
  EXPECT_EQ(Run(), 1);
  EXPECT_NE(TerminationMessage().find("PYTHON_EXEC"), std::string::npos)
      << TerminationMessage();
}

}  // namespace
}  // namespace distjob
