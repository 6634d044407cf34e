#include "rendezvous/rdzv_state.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/rdzv_test_states.h"

namespace distjob {
namespace {

TEST(RdzvStateTest, EncodeDecodeRoundTrip) {
  RdzvState s = ClosedRound(7, "a", 2, 3);
  s.restart_count = 2;
  s.prev_round = 6;
  s.prev_closer = "c";
  s.prev_size = 5;
  s.leader = "b";
  auto d = RdzvState::Decode(s.Encode());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->Encode(), s.Encode());
  EXPECT_EQ(d->leader, "b");
  EXPECT_EQ(NextRound(*d, 0).leader, "");
  EXPECT_FALSE(RdzvState::Decode("leader\n").ok());
  EXPECT_EQ(d->world_size, 3);
  EXPECT_EQ(d->prev_closer, "c");
  EXPECT_EQ(d->prev_size, 5);
  EXPECT_EQ(NextRound(*d, 0).prev_size, 2);
  EXPECT_FALSE(RdzvState::Decode("prev 6 c -1\n").ok());
  EXPECT_FALSE(RdzvState::Decode("round x\n").ok());
  EXPECT_FALSE(RdzvState::Decode("closer a 2\n").ok());
  EXPECT_FALSE(RdzvState::Decode("p a 1 10.0.0.1\n").ok());
}

// The state is what every node reads while it waits: its size must not
// grow with the job.
TEST(RdzvStateTest, ClosedStateDoesNotGrowWithTheJob) {
  RdzvState st = ClosedRound(1, "node-17", 4096, 32768);
  st.leader = "node-3";
  EXPECT_LT(st.Encode().size(), 80u);
}

TEST(RdzvStateTest, MembersRoundTripAndRejectMalformedLines) {
  std::vector<RdzvParticipant> m = {{"a", 2, "10.0.0.1"}, {"c", 1, "::1"}};
  auto d = DecodeMembers(EncodeMembers(m));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1].node, "c");
  EXPECT_EQ((*d)[1].addr, "::1");
  EXPECT_EQ((*d)[0].nproc, 2);
  EXPECT_EQ(DecodeMembers("a x 10.0.0.1\n").status().code(),
            absl::StatusCode::kDataLoss);
}

// A member list is no longer one value: at 100,000 members it would be
// megabytes, over the store's max_value_bytes.
TEST(RdzvStateTest, MemberChunksStayUnderTheirLimitAndReassemble) {
  const std::vector<RdzvParticipant> m = NumberedNodes(100000, 8);
  auto chunks = EncodeMemberChunks(m);
  ASSERT_GT(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].first, 0);
  for (const auto& [first, text] : chunks) {
    EXPECT_LE(text.size(), kMemberChunkBytes) << first;
  }
  std::reverse(chunks.begin(), chunks.end());  // any order
  auto back = AssembleMembers(chunks, 100000);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 100000u);
  EXPECT_EQ((*back)[0].node, "node-0");
  EXPECT_EQ((*back)[99999].node, "node-99999");
  EXPECT_EQ((*back)[4242].nproc, 8);
}

TEST(RdzvStateTest, MemberChunksKeepOnlyTheListOfTheRoundsSize) {
  // Small chunks: two members each.
  auto chunks = EncodeMemberChunks(NumberedNodes(6, 8), 40);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].first, 2);
  // A retried close with fewer members leaves its first attempt's tail.
  auto fewer = AssembleMembers(chunks, 3);
  ASSERT_TRUE(fewer.ok()) << fewer.status();
  EXPECT_EQ(fewer->size(), 3u);
  // A missing chunk, or a list shorter than the round, is data loss.
  auto gap = chunks;
  gap.erase(gap.begin() + 1);
  EXPECT_EQ(AssembleMembers(gap, 6).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(AssembleMembers(chunks, 7).status().code(),
            absl::StatusCode::kDataLoss);
  // A line longer than the chunk size gets a chunk of its own.
  EXPECT_EQ(EncodeMemberChunks(NumberedNodes(2, 8), 5).size(), 2u);
}

// A close written during the last call, then again for a node that joined
// during it: the second list's chunks start elsewhere, and the first
// write's chunks that it did not overwrite stay in the store.
TEST(RdzvStateTest, AListWrittenAgainWithMovedChunksReadsAsTheSecond) {
  std::vector<RdzvParticipant> before = NumberedNodes(6, 8);
  std::vector<RdzvParticipant> after = before;
  after.insert(after.begin() + 1, RdzvParticipant("late", 8, "10.0.0.9"));
  // The first write: one member a chunk (starts 0..5); the second, two a
  // chunk (starts 0, 2, 4, 6), overwrites the chunks at even starts and
  // leaves those at 1, 3 and 5, which hold the first list's members.
  std::map<int64_t, std::string> store;
  for (auto& [first, text] : EncodeMemberChunks(before, 20)) {
    store[first] = text;
  }
  ASSERT_EQ(store.size(), 6u);
  for (auto& [first, text] : EncodeMemberChunks(after, 40)) {
    store[first] = text;
  }
  ASSERT_EQ(store.size(), 7u);
  std::vector<std::pair<int64_t, std::string>> chunks(store.begin(),
                                                      store.end());
  auto back = AssembleMembers(chunks, 7);
  ASSERT_TRUE(back.ok()) << back.status();
  std::vector<std::string> nodes;
  for (const auto& p : *back) nodes.push_back(p.node);
  std::vector<std::string> want;
  for (const auto& p : after) want.push_back(p.node);
  EXPECT_EQ(nodes, want);
}

TEST(RdzvStateTest, HostFirstThenPreviousOrderThenNewcomers) {
  std::vector<RdzvParticipant> m = {
      {"new", 1, ""}, {"a", 1, ""}, {"h", 1, ""}, {"b", 1, ""}};
  AssignRanks("h", {"b", "a"}, &m);
  std::vector<std::string> order;
  for (const auto& p : m) order.push_back(p.node);
  EXPECT_EQ(order, (std::vector<std::string>{"h", "b", "a", "new"}));
}

std::vector<std::string> Order(const std::vector<RdzvParticipant>& m) {
  std::vector<std::string> order;
  for (const auto& p : m) order.push_back(p.node);
  return order;
}

RdzvParticipant Node(const std::string& node, const std::string& index,
                     const std::string& key = "") {
  RdzvParticipant p{node, 1, "10.0.0.1"};
  p.pod_index = index;
  p.order_key = key;
  return p;
}

TEST(RdzvStateTest, PodIndexOrdersMembersWhateverTheJoinOrder) {
  // Joined in reverse pod-index order, the store host last to join.
  std::vector<RdzvParticipant> m = {Node("d", "3"), Node("c", "2"),
                                    Node("b", "1"), Node("a", "0")};
  AssignRanks("d", {}, &m);
  EXPECT_EQ(Order(m), (std::vector<std::string>{"a", "b", "c", "d"}));
  // A later round of the same members keeps the order, whatever the
  // previous list or the join order said.
  std::vector<RdzvParticipant> again = {Node("b", "1"), Node("d", "3"),
                                        Node("a", "0"), Node("c", "2")};
  AssignRanks("d", {"d", "c", "b", "a"}, &again);
  EXPECT_EQ(Order(again), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(RdzvStateTest, DottedIndexComparesPartByPart) {
  std::vector<RdzvParticipant> m = {Node("j1p0", "1.0"), Node("j0p10", "0.10"),
                                    Node("j0p2", "0.2")};
  AssignRanks("", {}, &m);
  EXPECT_EQ(Order(m), (std::vector<std::string>{"j0p2", "j0p10", "j1p0"}));
}

TEST(RdzvStateTest, NodesWithoutIndexFollowInTheirOldOrder) {
  std::vector<RdzvParticipant> m = {{"new", 1, ""},
                                    Node("x", "1"),
                                    {"a", 1, ""},
                                    {"h", 1, ""},
                                    Node("y", "0")};
  AssignRanks("h", {"a"}, &m);
  EXPECT_EQ(Order(m), (std::vector<std::string>{"y", "x", "h", "a", "new"}));
}

TEST(RdzvStateTest, OrderKeyKeepsARackAdjacent) {
  // Racks interleaved by pod index: each rack's nodes become adjacent, the
  // racks in the order of their lowest index.
  std::vector<RdzvParticipant> m = {
      Node("n0", "0", "rack-b"), Node("n1", "1", "rack-a"),
      Node("n2", "2", "rack-b"), Node("n3", "3", "rack-a")};
  AssignRanks("", {}, &m);
  EXPECT_EQ(Order(m), (std::vector<std::string>{"n0", "n2", "n1", "n3"}));
  // A key alone (no index) groups in join order.
  std::vector<RdzvParticipant> keys = {Node("p", "", "r1"), Node("q", "", "r2"),
                                       Node("r", "", "r1")};
  AssignRanks("", {}, &keys);
  EXPECT_EQ(Order(keys), (std::vector<std::string>{"p", "r", "q"}));
}

TEST(RdzvStateTest, TopologyFieldsRoundTripInJoinAndMemberRecords) {
  RdzvParticipant p = Node("10.0.0.1-7", "1.2", "rack-a");
  auto j = DecodeJoin(EncodeJoin(p));
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->node, "10.0.0.1-7");
  EXPECT_EQ(j->pod_index, "1.2");
  EXPECT_EQ(j->order_key, "rack-a");
  auto plain = DecodeJoin(EncodeJoin({"n", 2, "h"}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->node, "n");
  EXPECT_EQ(plain->pod_index, "");
  auto m = DecodeMembers(EncodeMembers({p, {"b", 1, "h"}}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)[0].pod_index, "1.2");
  EXPECT_EQ((*m)[0].order_key, "rack-a");
  EXPECT_EQ((*m)[1].pod_index, "");
  EXPECT_EQ(DecodeJoin("1 h i=x n").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeMembers("a 1 h i=-1\n").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(IsPodIndex("0"));
  EXPECT_FALSE(IsPodIndex("1."));
  EXPECT_FALSE(IsPodIndex(""));
}

TEST(RdzvStateTest, RankRecordsCarryBaseRanksAndTheRing) {
  auto records = RankRecords({{"a", 2, "x"}, {"b", 3, "y"}, {"c", 1, "z"}});
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1].first, "b");
  EXPECT_EQ(records[1].second.group_rank, 1);
  EXPECT_EQ(records[1].second.base_rank, 2);
  EXPECT_EQ(records[2].second.base_rank, 5);
  EXPECT_EQ(records[1].second.next, "c");
  EXPECT_EQ(records[2].second.next, "a");  // the ring wraps
  auto d = DecodeRank(EncodeRank(records[2].second));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->base_rank, 5);
  EXPECT_EQ(d->next, "a");
  EXPECT_FALSE(DecodeRank("1 x a").ok());
  EXPECT_EQ(RankRecords({{"solo", 4, ""}})[0].second.next, "solo");
}

TEST(RdzvStateTest, NextRoundAfterAClosedRoundKeepsItsRankOrder) {
  RdzvState closed = ClosedRound(4, "c", 3, 6);
  closed.restart_count = 2;
  closed.prev_round = 3;
  closed.prev_closer = "old";
  RdzvState next = NextRound(closed, 1);
  EXPECT_EQ(next.round, 5);
  EXPECT_FALSE(next.closed);
  EXPECT_EQ(next.restart_count, 2);  // never fewer restarts than before
  EXPECT_EQ(next.closer, "");
  EXPECT_EQ(next.size, 0);
  EXPECT_EQ(next.world_size, 0);
  EXPECT_EQ(next.prev_round, 4);
  EXPECT_EQ(next.prev_closer, "c");
  EXPECT_EQ(NextRound(closed, 7).restart_count, 7);
}

TEST(RdzvStateTest, NextRoundAfterAnOpenRoundKeepsTheOrderItWouldHaveKept) {
  RdzvState open = OpenRound(5);
  open.restart_count = 1;
  open.prev_round = 4;
  open.prev_closer = "c";
  RdzvState next = NextRound(open, 0);
  EXPECT_EQ(next.round, 6);
  EXPECT_EQ(next.restart_count, 1);
  EXPECT_EQ(next.prev_round, 4);
  EXPECT_EQ(next.prev_closer, "c");
  RdzvState first;  // round 0, never closed: no order to keep
  EXPECT_EQ(NextRound(first, 0).prev_round, -1);
}

}  // namespace
}  // namespace distjob
