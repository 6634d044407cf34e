#include "agent/peer_failure.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/fake_rendezvous.h"

namespace distjob {
namespace {

FailureReport ValueErrorOnHostB() {
  FailureReport f;
  f.rank = 3;
  f.host = "b";
  f.exit.local_rank = 1;
  f.exit.pid = 42;
  f.exit.exit_code = 1;
  f.exit.time = absl::FromUnixSeconds(1700000000);
  f.exit_code = 1;
  f.cause.rule = "ValueError is a programming error";
  f.cause.exception.type = "ValueError";
  f.cause.exception.line = "ValueError: loss is NaN";
  f.cause.exception.excerpt = "Traceback ...\nValueError: loss is NaN";
  f.signature = "rank 3 ValueError: loss is NaN";
  f.logs = "/logs/attempt_0/1";
  return f;
}

FailureReport GlooClosed() {
  FailureReport f;
  f.rank = 0;
  f.exit_code = 1;
  f.cause.restart = true;
  f.cause.peer_communication = true;
  f.cause.rule = "RuntimeError is a gloo communication error";
  f.cause.exception.line = "RuntimeError: Connection closed by peer";
  return f;
}

TEST(OfferedFailureTest, RoundTripsWhatTheDeciderNeeds) {
  const FailureReport sent = ValueErrorOnHostB();
  absl::StatusOr<FailureReport> got =
      DecodeOfferedFailure(EncodeOfferedFailure(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->from_peer);
  EXPECT_EQ(got->rank, 3);
  EXPECT_EQ(got->host, "b");
  EXPECT_EQ(got->exit.local_rank, 1);
  EXPECT_EQ(got->exit.pid, 42);
  EXPECT_EQ(got->exit.exit_code, 1);
  EXPECT_EQ(got->exit.time, sent.exit.time);
  EXPECT_EQ(got->exit_code, 1);
  EXPECT_FALSE(got->cause.restart);
  EXPECT_FALSE(got->cause.peer_communication);
  EXPECT_EQ(got->cause.rule, sent.cause.rule);
  EXPECT_EQ(got->cause.exception.line, sent.cause.exception.line);
  EXPECT_EQ(got->cause.exception.excerpt, sent.cause.exception.excerpt);
  EXPECT_EQ(got->signature, sent.signature);
  EXPECT_EQ(got->logs, sent.logs);
}

TEST(OfferedFailureTest, CutsLongTexts) {
  FailureReport sent = ValueErrorOnHostB();
  sent.cause.exception.excerpt = std::string(1 << 20, 'x');
  const std::string text = EncodeOfferedFailure(sent);
  EXPECT_LT(text.size(), 64u << 10);
  absl::StatusOr<FailureReport> got = DecodeOfferedFailure(text);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->cause.exception.excerpt.size(), 4096u);
}

TEST(OfferedFailureTest, APeersControlBytesReachNoConsole) {
  FailureReport sent = ValueErrorOnHostB();
  sent.host = "host-b\x1b[2J";
  sent.cause.exception.line = "ValueError: x\n[distjob] job succeeded\r";
  sent.cause.exception.excerpt = "line 1\n\tline 2\x1b]0;title\x07\nline 3";
  absl::StatusOr<FailureReport> got =
      DecodeOfferedFailure(EncodeOfferedFailure(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->host, "host-b\\x1b[2J");
  EXPECT_EQ(got->cause.exception.line,
            "ValueError: x\\n[distjob] job succeeded\\r");
  // A traceback keeps its lines and indentation, nothing else.
  EXPECT_EQ(got->cause.exception.excerpt,
            "line 1\n\tline 2\\x1b]0;title\\x07\nline 3");
}

TEST(OfferedFailureTest, RefusesWhatIsNotAnOffer) {
  for (const std::string& text : std::vector<std::string>{
           "", "not json", "[1,2]", "\"text\"", R"({"rank":"3"})",
           R"({"rank":99999999999})", R"({"restart":1})",
           R"({"exception":{"line":"x"}})", R"({"time_us":1.5})"}) {
    EXPECT_FALSE(DecodeOfferedFailure(text).ok()) << text;
  }
}

class AwaitPeerVerdictTest : public ::testing::Test {
 protected:
  AwaitPeerVerdictTest() : rdzv_(&script_) {
    script_.peer_loss_window = absl::Milliseconds(300);
  }

  // Waits with a sleep that counts its calls and runs `during_` first.
  PeerVerdict Await() {
    return AwaitPeerVerdict(rdzv_, GlooClosed(), [this](absl::Duration d) {
      ++sleeps_;
      if (during_) during_(sleeps_);
      absl::SleepFor(d);
      return !stop_;
    });
  }

  FakeRendezvousScript script_;
  FakeElasticRendezvous rdzv_;
  std::function<void(int)> during_;
  int sleeps_ = 0;
  bool stop_ = false;
};

TEST_F(AwaitPeerVerdictTest, NothingWithinTheWindowIsThisNodesFailure) {
  const absl::Time start = absl::Now();
  EXPECT_EQ(Await().kind, PeerVerdict::Kind::kOwn);
  EXPECT_GE(absl::Now() - start, script_.peer_loss_window);
}

TEST_F(AwaitPeerVerdictTest, AnOfferMadeDuringTheWaitIsTheRootCause) {
  during_ = [this](int sleep) {
    if (sleep == 2) {
      script_.offered_failure = EncodeOfferedFailure(ValueErrorOnHostB());
    }
  };
  script_.peer_loss_window = absl::Seconds(60);
  PeerVerdict verdict = Await();
  ASSERT_EQ(verdict.kind, PeerVerdict::Kind::kPeerFailed);
  EXPECT_EQ(verdict.peer_failure.host, "b");
  EXPECT_EQ(verdict.peer_failure.cause.exception.line,
            "ValueError: loss is NaN");
  EXPECT_EQ(sleeps_, 2);  // seen at the next look, not at the window's end
}

TEST_F(AwaitPeerVerdictTest, AnOfferedCommunicationErrorIsNoRootCause) {
  script_.offered_failure = EncodeOfferedFailure(GlooClosed());
  EXPECT_EQ(Await().kind, PeerVerdict::Kind::kOwn);
}

TEST_F(AwaitPeerVerdictTest, ACommunicationErrorOfferedBesideIsKept) {
  FailureReport nccl = GlooClosed();
  nccl.host = "b";
  nccl.signature = "rank 1 RuntimeError: NCCL communicator was aborted";
  script_.offered_communication_error = EncodeOfferedFailure(nccl);
  PeerVerdict verdict = Await();
  EXPECT_EQ(verdict.kind, PeerVerdict::Kind::kOwn);
  ASSERT_TRUE(verdict.collateral.has_value());
  EXPECT_EQ(verdict.collateral->host, "b");
  EXPECT_EQ(verdict.collateral->signature, nccl.signature);
}

TEST(RootCauseRecordTest, EitherFailureSeenAgainRepeats) {
  FailureReport own, collateral, other;
  own.signature = "rank 0 RuntimeError: Connection closed by peer :4711";
  collateral.signature = "rank 1 RuntimeError: NCCL communicator was aborted";
  other.signature = "rank 0 RuntimeError: Connection closed by peer :4712";
  const std::string record = RootCauseRecord(own, collateral);
  EXPECT_EQ(record, own.signature + "\n" + collateral.signature);
  // The next decision, by either node.
  std::optional<FailureReport> next = collateral;
  EXPECT_EQ(RepeatOf(record, other, next), &*next);
  EXPECT_EQ(RepeatOf(record, collateral, std::nullopt), &collateral);
  EXPECT_EQ(RepeatOf(record, other, std::nullopt), nullptr);
  // A failure without a signature (a signal) never repeats, even "".
  FailureReport signal;
  EXPECT_EQ(RootCauseRecord(signal, std::nullopt), "");
  EXPECT_EQ(RepeatOf("", signal, std::nullopt), nullptr);
}

TEST_F(AwaitPeerVerdictTest, AnOfferThatDoesNotDecodeIsIgnored) {
  script_.offered_failure = "{\"rank\": \"not a number\"}";
  EXPECT_EQ(Await().kind, PeerVerdict::Kind::kOwn);
}

TEST_F(AwaitPeerVerdictTest, ALostPeerMakesTheFailureItsConsequence) {
  during_ = [this](int sleep) {
    if (sleep == 1) script_.FireMembershipChange();
  };
  script_.peer_loss_window = absl::Seconds(60);
  EXPECT_EQ(Await().kind, PeerVerdict::Kind::kPeerLost);
}

TEST_F(AwaitPeerVerdictTest, AStopSignalEndsTheWait) {
  stop_ = true;
  script_.peer_loss_window = absl::Seconds(60);
  EXPECT_EQ(Await().kind, PeerVerdict::Kind::kStopped);
  EXPECT_EQ(sleeps_, 1);
}

}  // namespace
}  // namespace distjob
