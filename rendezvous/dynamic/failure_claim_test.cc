#include "rendezvous/dynamic/failure_claim.h"

#include <atomic>
#include <string>

#include "gtest/gtest.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

class FailureClaimTest : public ::testing::Test {
 protected:
  FailureClaim::Deps Deps(const std::string& node) {
    return {&store_, &keys_, node, &host_left_};
  }

  StoreCore core_;
  LocalStore store_{&core_};
  const RdzvKeys keys_{"job"};
  std::atomic<bool> host_left_{false};
};

TEST_F(FailureClaimTest, TheFirstClaimOfARoundDecidesAndTheOthersAwaitIt) {
  FailureClaim n0(Deps("n0")), n1(Deps("n1"));
  EXPECT_TRUE(n1.Claim(2));
  EXPECT_FALSE(n0.Claim(2));
  EXPECT_EQ(n0.decider(), "n1");
  EXPECT_EQ(n0.decider_round(), 2);
  // The winner asking again still decides; the next round is claimed anew.
  EXPECT_TRUE(n1.Claim(2));
  EXPECT_TRUE(n0.Claim(3));
  n0.ForgetDecider();
  EXPECT_EQ(n0.decider_round(), -1);
}

TEST_F(FailureClaimTest, WithTheHostGoneEveryNodeDecides) {
  FailureClaim n0(Deps("n0")), n1(Deps("n1"));
  EXPECT_TRUE(n1.Claim(2));
  host_left_ = true;
  EXPECT_TRUE(n0.Claim(2));
  EXPECT_EQ(n0.decider_round(), -1);
}

TEST_F(FailureClaimTest, TheRestartsCarriedAreTheMostNoted) {
  FailureClaim n0(Deps("n0"));
  n0.NoteRestart(2);
  n0.NoteRestart(1);
  EXPECT_EQ(n0.pending_restarts(), 2);
}

TEST_F(FailureClaimTest, TheFirstOfferStaysAndTheRootCauseIsSwapped) {
  constexpr auto kRoot = OfferedFailureKind::kRootCause;
  FailureClaim n0(Deps("n0")), n1(Deps("n1"));
  EXPECT_EQ(n0.OfferedFailure(4, kRoot), std::nullopt);
  n1.OfferFailure(4, kRoot, "n1: exit 1");
  n0.OfferFailure(4, kRoot, "n0: exit 9");
  EXPECT_EQ(n0.OfferedFailure(4, kRoot), "n1: exit 1");
  EXPECT_EQ(n0.SwapRootCause("oom"), "");
  EXPECT_EQ(n1.SwapRootCause("nan"), "oom");
}

// A communication error offered first takes no root cause's place: each
// kind keeps its own first offer.
TEST_F(FailureClaimTest, EachKindOfOfferKeepsItsOwnFirst) {
  constexpr auto kRoot = OfferedFailureKind::kRootCause;
  constexpr auto kComm = OfferedFailureKind::kCommunication;
  FailureClaim n0(Deps("n0")), n1(Deps("n1")), n2(Deps("n2"));
  n1.OfferFailure(4, kComm, "n1: NCCL aborted");
  n2.OfferFailure(4, kRoot, "n2: ValueError");
  n2.OfferFailure(4, kComm, "n2: gloo closed");
  EXPECT_EQ(n0.OfferedFailure(4, kComm), "n1: NCCL aborted");
  EXPECT_EQ(n0.OfferedFailure(4, kRoot), "n2: ValueError");
  EXPECT_EQ(n0.OfferedFailure(5, kComm), std::nullopt);
}

}  // namespace
}  // namespace distjob
