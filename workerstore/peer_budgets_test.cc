#include "workerstore/peer_budgets.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

using Verdict = PeerBudgets::Verdict;

PeerBudgets::Limits Small() {
  PeerBudgets::Limits l;
  l.connections = 8;
  l.connections_per_peer = 100;
  l.waits = 8;
  l.waits_per_peer = 100;
  l.wait_bytes = 8000;
  l.wait_bytes_per_peer = 100000;
  return PeerBudgets::WithShare(l);
}

TEST(PeerBudgetsTest, PerPeerCapsAreAShareOfTheGlobalOnes) {
  const PeerBudgets::Limits l = Small();
  EXPECT_EQ(l.connections_per_peer, 2u);
  EXPECT_EQ(l.waits_per_peer, 2u);
  EXPECT_EQ(l.wait_bytes_per_peer, 2000u);
  PeerBudgets::Limits low = Small();
  low.connections_per_peer = 1;
  EXPECT_EQ(PeerBudgets::WithShare(low).connections_per_peer, 1u);
  PeerBudgets::Limits tiny;
  tiny.connections = 2;
  tiny.connections_per_peer = 100;
  EXPECT_EQ(PeerBudgets::WithShare(tiny).connections_per_peer, 1u);
}

TEST(PeerBudgetsTest, AnAddressOverItsShareIsRefused) {
  PeerBudgets b(Small());
  ASSERT_EQ(b.AdmitConnection("10.0.0.1").kind, Verdict::kAdmit);
  b.AddConnection("10.0.0.1", 1);
  b.AddConnection("10.0.0.1", 2);
  const Verdict v = b.AdmitConnection("10.0.0.1");
  EXPECT_EQ(v.kind, Verdict::kRefuse);
  EXPECT_EQ(v.reason, "max_connections_per_peer 2 reached");
  EXPECT_EQ(b.AdmitConnection("10.0.0.2").kind, Verdict::kAdmit);

  b.AddWait("10.0.0.1", 1, 10, 100);
  b.AddWait("10.0.0.1", 2, 11, 100);
  EXPECT_EQ(b.AdmitWait("10.0.0.1", 1).kind, Verdict::kRefuse);
  EXPECT_EQ(b.AdmitWait("10.0.0.2", 1).kind, Verdict::kAdmit);
  // Bytes: 2000 per address.
  EXPECT_EQ(b.AdmitWait("10.0.0.2", 2001).kind, Verdict::kRefuse);
  EXPECT_EQ(b.AdmitWait("10.0.0.2", 2000).kind, Verdict::kAdmit);
  b.RemoveWait(10);
  EXPECT_EQ(b.AdmitWait("10.0.0.1", 1).kind, Verdict::kAdmit);
  EXPECT_EQ(b.waits(), 1u);
  EXPECT_EQ(b.wait_bytes(), 100u);
}

// Four addresses at their share fill the budget: a fifth's wait evicts the
// heaviest address's newest wait; one of the heaviest is refused instead.
TEST(PeerBudgetsTest, AFullBudgetTakesFromTheHeaviestAddressOnly) {
  PeerBudgets b(Small());
  uint64_t wait = 100;
  for (int peer = 1; peer <= 4; ++peer) {
    const std::string ip = "10.0.0." + std::to_string(peer);
    b.AddConnection(ip, peer);
    for (int i = 0; i < (peer == 4 ? 1 : 2); ++i) {
      ASSERT_EQ(b.AdmitWait(ip, 10).kind, Verdict::kAdmit);
      b.AddWait(ip, peer, wait++, 10);
    }
  }
  // 7 of 8: one more fits.
  ASSERT_EQ(b.AdmitWait("10.0.0.4", 10).kind, Verdict::kAdmit);
  b.AddWait("10.0.0.4", 44, wait++, 10);
  ASSERT_EQ(b.waits(), 8u);
  // 10.0.0.4 is at its share: refused.
  EXPECT_EQ(b.AdmitWait("10.0.0.4", 10).kind, Verdict::kRefuse);
  // An innocent address: the newest wait of a heaviest one (all hold two;
  // the first found of the heaviest) gives way, by its connection.
  const Verdict v = b.AdmitWait("10.0.0.9", 10);
  ASSERT_EQ(v.kind, Verdict::kEvict);
  EXPECT_NE(v.victim, 0u);
  EXPECT_NE(v.reason.find("max_waiters 8 parked waits in all and 10.0.0."),
            std::string::npos)
      << v.reason;
}

TEST(PeerBudgetsTest, TheVictimIsTheNewestWaitOfTheHeaviestAddress) {
  PeerBudgets::Limits l = Small();
  l.waits_per_peer = 8;
  PeerBudgets b(l);
  b.AddWait("10.0.0.1", 1, 1, 10);
  b.AddWait("10.0.0.2", 2, 2, 10);
  b.AddWait("10.0.0.2", 3, 3, 10);
  b.AddWait("10.0.0.2", 5, 9, 10);
  b.AddWait("10.0.0.2", 4, 4, 10);
  b.AddWait("10.0.0.3", 6, 5, 10);
  b.AddWait("10.0.0.3", 7, 6, 10);
  b.AddWait("10.0.0.1", 8, 7, 10);
  const Verdict v = b.AdmitWait("10.0.0.1", 10);
  ASSERT_EQ(v.kind, Verdict::kEvict);
  EXPECT_EQ(v.victim, 5u);  // wait 9, the newest of 10.0.0.2
  // The heaviest itself is refused.
  EXPECT_EQ(b.AdmitWait("10.0.0.2", 10).kind, Verdict::kRefuse);
}

TEST(PeerBudgetsTest, FullWaitBytesEvictTheAddressHoldingTheMostBytes) {
  PeerBudgets::Limits l = Small();
  l.waits_per_peer = 8;
  PeerBudgets b(l);
  b.AddWait("10.0.0.1", 1, 1, 1000);
  b.AddWait("10.0.0.1", 1, 2, 1000);
  b.AddWait("10.0.0.2", 2, 3, 1000);
  b.AddWait("10.0.0.2", 2, 4, 1000);
  b.AddWait("10.0.0.3", 3, 5, 1999);
  b.AddWait("10.0.0.4", 4, 6, 1000);
  b.AddWait("10.0.0.4", 7, 7, 1001);  // 8000 bytes in all
  const Verdict v = b.AdmitWait("10.0.0.5", 2);
  ASSERT_EQ(v.kind, Verdict::kEvict);
  EXPECT_EQ(v.victim, 7u);  // 10.0.0.4's newest: 2001 bytes, the most
  EXPECT_NE(v.reason.find("max_waiter_bytes 8000 in all"), std::string::npos);
}

TEST(PeerBudgetsTest, AFullConnectionBudgetEvictsTheHeaviestsNewest) {
  PeerBudgets::Limits l = Small();
  l.connections_per_peer = 5;
  PeerBudgets b(l);
  for (uint64_t c = 1; c <= 5; ++c) b.AddConnection("10.0.0.1", c);
  b.AddConnection("10.0.0.2", 6);
  b.AddConnection("10.0.0.2", 7);
  b.AddConnection("10.0.0.3", 8);
  ASSERT_EQ(b.connections(), 8u);
  const Verdict v = b.AdmitConnection("10.0.0.3");
  ASSERT_EQ(v.kind, Verdict::kEvict);
  EXPECT_EQ(v.victim, 5u);
  EXPECT_EQ(b.AdmitConnection("10.0.0.1").kind, Verdict::kRefuse);
  b.RemoveConnection("10.0.0.1", 5);
  EXPECT_EQ(b.AdmitConnection("10.0.0.3").kind, Verdict::kAdmit);
  EXPECT_EQ(b.PeerUsage("10.0.0.1").connections, 4u);
}

TEST(PeerBudgetsTest, AnAddressHoldingNothingIsForgotten) {
  PeerBudgets b(Small());
  b.AddConnection("10.0.0.1", 1);
  b.AddWait("10.0.0.1", 1, 1, 10);
  b.RemoveConnection("10.0.0.1", 1);
  EXPECT_EQ(b.PeerUsage("10.0.0.1").waits, 1u);
  b.RemoveWait(1);
  b.RemoveWait(1);  // unknown: ignored
  const PeerBudgets::Usage u = b.PeerUsage("10.0.0.1");
  EXPECT_EQ(u.connections + u.waits + u.wait_bytes, 0u);
  EXPECT_EQ(b.connections(), 0u);
  EXPECT_EQ(b.waits(), 0u);
}

}  // namespace
}  // namespace distjob
