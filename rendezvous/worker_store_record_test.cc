#include "rendezvous/worker_store_record.h"

#include "common/json.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

WorkerStoreRecord AgentRecord() {
  WorkerStoreRecord r;
  r.round = 7;
  r.agent = true;
  r.addr = "[fd00::1]:41000";
  r.members_only = true;
  r.admitted = 3;
  r.unresolved = 1;
  return r;
}

TEST(WorkerStoreRecordTest, AgentRecordIsAJsonObjectThatRoundTrips) {
  const std::string value = EncodeWorkerStoreRecord(AgentRecord());
  auto json = ParseJson(value, "record");
  ASSERT_TRUE(json.ok()) << value;
  auto want = ParseJson(R"({"round":7,"served_by":"agent",
      "addr":"[fd00::1]:41000","members_only":true,"members_admitted":3,
      "members_unresolved":1})",
                        "want");
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(*json, *want);
  auto back = DecodeWorkerStoreRecord(value);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->round, 7);
  EXPECT_TRUE(back->agent);
  EXPECT_EQ(back->addr, "[fd00::1]:41000");
  EXPECT_TRUE(back->members_only);
  EXPECT_EQ(back->admitted, 3);
  EXPECT_EQ(back->unresolved, 1);
}

TEST(WorkerStoreRecordTest, WorkerRecordRoundTripsWithTheSettingVerbatim) {
  WorkerStoreRecord r;
  r.round = 2;
  r.opted_out_by = "--worker-store worker \"quoted\"";
  const std::string value = EncodeWorkerStoreRecord(r);
  auto json = ParseJson(value, "record");
  ASSERT_TRUE(json.ok()) << value;
  EXPECT_EQ(*json, WorkerStoreJson(r));
  EXPECT_EQ((*json)["served_by"], "worker");
  EXPECT_FALSE(json->contains("addr"));
  auto back = DecodeWorkerStoreRecord(value);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->round, 2);
  EXPECT_FALSE(back->agent);
  EXPECT_EQ(back->opted_out_by, r.opted_out_by);
}

TEST(WorkerStoreRecordTest, KeysItDoesNotKnowAreIgnored) {
  auto back = DecodeWorkerStoreRecord(
      R"({"round":1,"served_by":"worker","opted_out_by":"","later":[1]})");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->round, 1);
}

TEST(WorkerStoreRecordTest, MalformedRecordNamesTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"served_by":"worker","opted_out_by":""})", "'round'"},
      {R"({"round":"1","served_by":"worker","opted_out_by":""})", "'round'"},
      {R"({"round":1,"opted_out_by":""})", "'served_by'"},
      {R"({"round":1,"served_by":"pod"})", "'served_by'"},
      {R"({"round":1,"served_by":"worker"})", "'opted_out_by'"},
      {R"({"round":1,"served_by":"agent","addr":"","members_only":true,
           "members_admitted":1,"members_unresolved":0})",
       "'addr'"},
      {R"({"round":1,"served_by":"agent","addr":"h:1","members_only":1,
           "members_admitted":1,"members_unresolved":0})",
       "'members_only'"},
      {R"({"round":1,"served_by":"agent","addr":"h:1","members_only":true,
           "members_admitted":1.5,"members_unresolved":0})",
       "'members_admitted'"},
      {R"({"round":1,"served_by":"agent","addr":"h:1","members_only":true,
           "members_admitted":1})",
       "'members_unresolved'"},
  };
  for (const auto& [value, key] : cases) {
    auto r = DecodeWorkerStoreRecord(value);
    ASSERT_FALSE(r.ok()) << value;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_NE(r.status().message().find(key), std::string::npos)
        << value << ": " << r.status();
  }
}

TEST(WorkerStoreRecordTest, NotAJsonObjectIsRejected) {
  // The line of text agents wrote before the JSON record, and other
  // non-objects.
  for (const char* value : {"3 agent 10.0.0.1:41000 1 2 0", "[1]", "", "7"}) {
    auto r = DecodeWorkerStoreRecord(value);
    ASSERT_FALSE(r.ok()) << value;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_NE(r.status().message().find("workers' store record"),
              std::string::npos)
        << r.status();
  }
}

TEST(WorkerStoreRecordTest, LineForTheTable) {
  EXPECT_EQ(WorkerStoreLine(AgentRecord()),
            "served by the agent on [fd00::1]:41000 (round 7), round members "
            "and loopback only (3 admitted, 1 unresolved)");
  WorkerStoreRecord open = AgentRecord();
  open.members_only = false;
  EXPECT_EQ(WorkerStoreLine(open),
            "served by the agent on [fd00::1]:41000 (round 7), open to any "
            "peer (no rendezvous token)");
  WorkerStoreRecord worker;
  worker.round = 1;
  EXPECT_EQ(WorkerStoreLine(worker), "worker rank 0 (round 1)");
}

}  // namespace
}  // namespace distjob
