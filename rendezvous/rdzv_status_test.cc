#include "rendezvous/rdzv_status.h"

#include "common/json.h"
#include "gtest/gtest.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/rdzv_test_states.h"
#include "rendezvous/round_info.h"
#include "rendezvous/store/store_core.h"
#include "rendezvous/worker_store_record.h"

namespace distjob {
namespace {

TEST(RdzvStatusTest, ShowsRoundParticipantsAndWaitingNodes) {
  StoreCore core;
  LocalStore store(&core);
  ASSERT_TRUE(
      store.Set("rdzv/j/ctl/state", ClosedRound(2, "b-2", 2, 4).Encode()).ok());
  ASSERT_TRUE(
      store
          .Set("rdzv/j/members/2/b-2/0",
               EncodeMembers({{"a-1", 2, "10.0.0.1"}, {"b-2", 2, "10.0.0.2"}}))
          .ok());
  ASSERT_TRUE(store.Set("rdzv/j/ctl/alive/a-1", "1", absl::Seconds(10)).ok());
  ASSERT_TRUE(store.Set("rdzv/j/ctl/waiting/c-3", "1", absl::Seconds(10)).ok());
  auto text = RenderRendezvousStatus(&store, "j", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("round 2 closed"), std::string::npos) << *text;
  EXPECT_NE(text->find("b-2"), std::string::npos);
  EXPECT_NE(text->find("waiting: c-3"), std::string::npos);
  auto json = RenderRendezvousStatus(&store, "", true);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"run_id\":\"j\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"rank\":1,\"node\":\"b-2\""), std::string::npos);
  // a-1 holds a lease, b-2 none.
  EXPECT_NE(json->find("\"addr\":\"10.0.0.1\",\"heartbeat_age_s\":0."),
            std::string::npos)
      << *json;
  EXPECT_NE(json->find("\"addr\":\"10.0.0.2\",\"heartbeat_age_s\":null"),
            std::string::npos)
      << *json;
  EXPECT_EQ(RenderRendezvousStatus(&store, "nope", false).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RdzvStatusTest, ShowsWhoServesTheWorkersStore) {
  StoreCore core;
  LocalStore store(&core);
  RdzvState st;
  st.round = 1;
  ASSERT_TRUE(store.Set("rdzv/a/ctl/state", st.Encode()).ok());
  ASSERT_TRUE(store.Set("rdzv/w/ctl/state", st.Encode()).ok());
  ASSERT_TRUE(store.Set("rdzv/x/ctl/state", st.Encode()).ok());
  WorkerStoreRecord agent;
  agent.round = 1;
  agent.agent = true;
  agent.addr = "[fd00::1]:41000";
  agent.members_only = true;
  agent.admitted = 2;
  agent.unresolved = 1;
  ASSERT_TRUE(
      store.Set(RdzvKeys("a").WorkerStore(), EncodeWorkerStoreRecord(agent))
          .ok());
  WorkerStoreRecord worker;
  worker.round = 1;
  worker.opted_out_by = "--worker-store worker";
  ASSERT_TRUE(
      store.Set(RdzvKeys("w").WorkerStore(), EncodeWorkerStoreRecord(worker))
          .ok());
  auto text = RenderRendezvousStatus(&store, "", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("workers' store: served by the agent on [fd00::1]:41000 "
                       "(round 1), round members and loopback only (2 "
                       "admitted, 1 unresolved)"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("workers' store: worker rank 0 (round 1), opted out "
                       "by --worker-store worker"),
            std::string::npos)
      << *text;
  // x's round 0 never closed: no record yet.
  EXPECT_NE(text->find("workers' store: -"), std::string::npos) << *text;
  auto json = RenderRendezvousStatus(&store, "", true);
  ASSERT_TRUE(json.ok()) << json.status();
  auto doc = ParseJson(*json, "status");
  ASSERT_TRUE(doc.ok()) << doc.status();
  ASSERT_EQ(doc->size(), 3u);
  const Json& a = (*doc)[0]["worker_store"];
  EXPECT_EQ(a["served_by"], "agent");
  EXPECT_EQ(a["addr"], "[fd00::1]:41000");
  EXPECT_EQ(a["members_only"], true);
  EXPECT_EQ(a["members_admitted"], 2);
  EXPECT_EQ(a["members_unresolved"], 1);
  EXPECT_EQ((*doc)[1]["worker_store"]["served_by"], "worker");
  EXPECT_EQ((*doc)[1]["worker_store"]["opted_out_by"], "--worker-store worker");
  EXPECT_TRUE((*doc)[2]["worker_store"].is_null());
}

TEST(RdzvStatusTest, OpenRoundListsItsJoinRecordsInJoinOrder) {
  StoreCore core;
  LocalStore store(&core);
  ASSERT_TRUE(store.Set("rdzv/j/ctl/state", OpenRound(3).Encode()).ok());
  ASSERT_TRUE(
      store.Set("rdzv/j/join/3/2", EncodeJoin({"b-2", 4, "10.0.0.2"})).ok());
  ASSERT_TRUE(
      store.Set("rdzv/j/join/3/1", EncodeJoin({"a-1", 4, "10.0.0.1"})).ok());
  ASSERT_TRUE(
      store.Set("rdzv/j/join/2/1", EncodeJoin({"old", 4, "10.0.0.9"})).ok());
  auto json = RenderRendezvousStatus(&store, "j", true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("\"closed\":false"), std::string::npos) << *json;
  EXPECT_NE(json->find("{\"rank\":null,\"node\":\"a-1\",\"nproc\":4"),
            std::string::npos)
      << *json;
  EXPECT_LT(json->find("a-1"), json->find("b-2"));
  EXPECT_EQ(json->find("old"), std::string::npos) << *json;
}

// A large round's member list is in chunks (rdzv_state.h), and the
// listing status reads comes in pages: 3,000 members, over two pages.
TEST(RdzvStatusTest, ClosedRoundListsMembersFromEveryChunk) {
  StoreCore core;
  LocalStore store(&core);
  const RdzvKeys keys("j");
  ASSERT_TRUE(
      store.Set(keys.State(), ClosedRound(4, "node-0", 3000, 3000).Encode())
          .ok());
  auto chunks = EncodeMemberChunks(NumberedNodes(3000), 4096);
  ASSERT_GT(chunks.size(), 2u);
  for (const auto& [first, text] : chunks) {
    ASSERT_TRUE(store.Set(keys.Members(4, "node-0", first), text).ok());
  }
  // Filler keys that sort before the chunks push them past the first page.
  for (int i = 0; i < 1500; ++i) {
    ASSERT_TRUE(
        store.Set(keys.Join(3, i + 1), EncodeJoin({"x", 1, "10.0.0.2"})).ok());
  }
  auto json = RenderRendezvousStatus(&store, "j", true);
  ASSERT_TRUE(json.ok()) << json.status();
  auto parsed = ParseJson(*json, "status --json");
  ASSERT_TRUE(parsed.ok()) << *json;
  const auto& participants = (*parsed)[0]["participants"];
  ASSERT_EQ(participants.size(), 3000u);
  EXPECT_EQ(participants[2999]["node"], "node-2999");
  EXPECT_EQ(participants[2999]["rank"], 2999);
}

// Node names come from other pods' join records: whatever bytes they hold,
// --json stays parseable.
TEST(RdzvStatusTest, JsonIsValidForAnyNodeName) {
  StoreCore core;
  LocalStore store(&core);
  ASSERT_TRUE(store.Set("rdzv/j/ctl/state", OpenRound(1).Encode()).ok());
  ASSERT_TRUE(
      store.Set("rdzv/j/join/1/1", EncodeJoin({"n\"\\\xff\xfe", 1, "10.0.0.1"}))
          .ok());
  auto out = RenderRendezvousStatus(&store, "j", true);
  ASSERT_TRUE(out.ok()) << out.status();
  auto json = ParseJson(*out, "status --json");
  ASSERT_TRUE(json.ok()) << *out;
  EXPECT_EQ((*json)[0]["participants"][0]["node"],
            "n\"\\\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_TRUE((*json)[0]["participants"][0]["rank"].is_null());
}

// Round 0 writes no state until it closes: the first round is shown from
// its joins, with what it waits for, while it is still open.
TEST(RdzvStatusTest, FirstRoundIsShownWhileItIsOpen) {
  StoreCore core;
  LocalStore store(&core);
  const RdzvKeys keys("j");
  ASSERT_TRUE(store.Add(keys.Joined(0), 1).ok());
  ASSERT_TRUE(
      store.Set(keys.Join(0, 1), EncodeJoin({"a-1", 2, "10.0.0.1"})).ok());
  ASSERT_TRUE(store
                  .Set(keys.RoundInfo(0),
                       EncodeRoundInfo({2, 4, absl::Seconds(30), std::nullopt}))
                  .ok());
  auto text = RenderRendezvousStatus(&store, "", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("rendezvous j: round 0 open"), std::string::npos)
      << *text;
  EXPECT_NE(text->find("joined 1 node(s) of 2..4; waiting for 1 more"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("a-1"), std::string::npos) << *text;
  auto json = RenderRendezvousStatus(&store, "j", true);
  ASSERT_TRUE(json.ok()) << json.status();
  auto doc = ParseJson(*json, "status --json");
  ASSERT_TRUE(doc.ok()) << *json;
  const Json& open = (*doc)[0]["open_round"];
  EXPECT_EQ(open["joined"], 1) << *json;
  EXPECT_EQ(open["min_nodes"], 2);
  EXPECT_EQ(open["nodes_needed"], 1);
  EXPECT_TRUE(open["last_call_ends"].is_null());
  // min_nodes reached: the last call's end, from the node that began it.
  ASSERT_TRUE(
      store.Set(keys.Join(0, 2), EncodeJoin({"b-2", 2, "10.0.0.2"})).ok());
  ASSERT_TRUE(store
                  .Set(keys.RoundInfo(0),
                       EncodeRoundInfo({2, 4, absl::Seconds(30),
                                        absl::FromUnixSeconds(1800000000)}))
                  .ok());
  text = RenderRendezvousStatus(&store, "j", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("joined 2 node(s) of 2..4; last call ends 08:00:00 UTC"),
            std::string::npos)
      << *text;
  json = RenderRendezvousStatus(&store, "j", true);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"last_call_ends\":\"2027-01-15T08:00:00.000Z\""),
            std::string::npos)
      << *json;
}

// A round that re-forms after a failure names the last round's members
// that have not joined it again: who the job waits for.
TEST(RdzvStatusTest, ReformingRoundNamesWhoHasNotRejoined) {
  StoreCore core;
  LocalStore store(&core);
  const RdzvKeys keys("j");
  RdzvState st = OpenRound(3);
  st.prev_round = 2;
  st.prev_closer = "a-1";
  st.prev_size = 2;
  ASSERT_TRUE(store.Set(keys.State(), st.Encode()).ok());
  ASSERT_TRUE(
      store
          .Set(keys.Members(2, "a-1", 0),
               EncodeMembers({{"a-1", 1, "10.0.0.1"}, {"b-2", 1, "10.0.0.2"}}))
          .ok());
  ASSERT_TRUE(
      store.Set(keys.Join(3, 1), EncodeJoin({"a-1", 1, "10.0.0.1"})).ok());
  auto text = RenderRendezvousStatus(&store, "j", false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("not joined again from round 2: b-2"), std::string::npos)
      << *text;
  auto json = RenderRendezvousStatus(&store, "j", true);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"missing_from_last_round\":[\"b-2\"]"),
            std::string::npos)
      << *json;
}

// A key written by a hostile pod cannot drive the operator's terminal:
// no control byte, and no C1 control in UTF-8, is printed raw.
TEST(RdzvStatusTest, StoreTextNeverReachesTheTerminalRaw) {
  StoreCore core;
  LocalStore store(&core);
  const std::string evil =
      "n\x1b[2J\x1b]0;pwned\x07\xc2\x9b"
      "31m";
  ASSERT_TRUE(store.Set("rdzv/j/ctl/state", OpenRound(1).Encode()).ok());
  ASSERT_TRUE(
      store.Set("rdzv/j/join/1/1", EncodeJoin({evil, 1, "10.0.0.1"})).ok());
  ASSERT_TRUE(store.Set("rdzv/j/host", evil).ok());
  for (bool as_json : {false, true}) {
    auto out = RenderRendezvousStatus(&store, "j", as_json);
    ASSERT_TRUE(out.ok()) << out.status();
    for (char c : *out) {
      const auto u = static_cast<unsigned char>(c);
      EXPECT_TRUE((u >= 0x20 && u < 0x7f) || c == '\n')
          << "byte " << int(u) << " in " << *out;
    }
  }
}

}  // namespace
}  // namespace distjob
