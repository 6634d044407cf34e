#include "rendezvous/rdzv_keys.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RdzvKeysTest, KeysOfOneJobAreUnderItsPrefix) {
  const RdzvKeys k("job");
  EXPECT_EQ(k.prefix(), "rdzv/job/");
  EXPECT_EQ(RdzvKeys::Prefix("job"), "rdzv/job/");
  EXPECT_EQ(k.Ctl(), "rdzv/job/ctl/");
  EXPECT_EQ(k.State(), "rdzv/job/ctl/state");
  EXPECT_EQ(k.Alive("n1"), "rdzv/job/ctl/alive/n1");
  EXPECT_EQ(k.Waiting("n1"), "rdzv/job/ctl/waiting/n1");
  EXPECT_EQ(k.Aborted(), "rdzv/job/ctl/state-aborted");
  EXPECT_EQ(k.HostLeft(), "rdzv/job/ctl/state-host-left");
  // One listing of the state's key reads the job's end too.
  EXPECT_EQ(k.Aborted().rfind(k.State(), 0), 0u);
  EXPECT_EQ(k.HostLeft().rfind(k.State(), 0), 0u);
  EXPECT_EQ(k.Host(), "rdzv/job/host");
  EXPECT_EQ(k.Joined(3), "rdzv/job/joined/3");
  EXPECT_EQ(k.Join(3, 12), "rdzv/job/join/3/12");
  EXPECT_EQ(k.MembersPrefix(3, "c"), "rdzv/job/members/3/c/");
  EXPECT_EQ(k.Members(3, "c", 2048), "rdzv/job/members/3/c/2048");
  EXPECT_EQ(k.Rank(3, "c", "n1"), "rdzv/job/rank/3/c/n1");
  EXPECT_EQ(k.Master(3), "rdzv/job/master/3");
  EXPECT_EQ(k.Failed(3), "rdzv/job/failed/3");
  EXPECT_EQ(k.Done(3, "n1"), "rdzv/job/done/3/n1");
  EXPECT_EQ(k.DoneCount(3), "rdzv/job/done-count/3");
  EXPECT_EQ(k.DoneAll(3), "rdzv/job/done-all/3");
  EXPECT_EQ(k.Left(3), "rdzv/job/left/3");
  EXPECT_EQ(k.SeenEnd("n1"), "rdzv/job/seen-end/n1");
}

TEST(RdzvKeysTest, ParsesWhatItBuilds) {
  const RdzvKeys k("job");
  EXPECT_EQ(ParseRdzvStateKey(k.State()), "job");
  EXPECT_EQ(ParseRdzvStateKey(RdzvKeys("a/b").State()), "a/b");
  EXPECT_EQ(k.ParseAlive(k.Alive("10.0.0.1-7")), "10.0.0.1-7");
  EXPECT_EQ(k.ParseWaiting(k.Waiting("n2")), "n2");
  EXPECT_EQ(k.ParseDone(k.Done(4, "n3"), 4), "n3");
  EXPECT_EQ(k.ParseSeenEnd(k.SeenEnd("n4")), "n4");
  EXPECT_EQ(k.ParseJoin(k.Join(5, 1), 5), 1);
  EXPECT_EQ(k.ParseJoin(k.Join(5, 4096), 5), 4096);
  EXPECT_EQ(k.ParseMembers(k.Members(5, "c", 0), 5, "c"), 0);
  EXPECT_EQ(k.ParseMembers(k.Members(5, "c", 9000), 5, "c"), 9000);
}

TEST(RdzvKeysTest, RejectsMalformedAndForeignKeys) {
  const RdzvKeys k("job");
  for (const char* key :
       {"", "rdzv/", "rdzv/ctl/state", "rdzv//ctl/state", "rdzv/job/ctl/stat",
        "x/job/ctl/state", "rdzv/job/ctl/state/x"}) {
    EXPECT_EQ(ParseRdzvStateKey(key), std::nullopt) << key;
  }
  for (const char* key :
       {"rdzv/job/ctl/waiting/", "rdzv/job/ctl/waiting/a/b",
        "rdzv/other/ctl/waiting/n1", "rdzv/job/ctl/alive/n1", "n1"}) {
    EXPECT_EQ(k.ParseWaiting(key), std::nullopt) << key;
  }
  EXPECT_EQ(k.ParseAlive("rdzv/job/ctl/waiting/n1"), std::nullopt);
  EXPECT_EQ(k.ParseDone(k.Done(4, "n3"), 5), std::nullopt);
  EXPECT_EQ(k.ParseSeenEnd("rdzv/job/seen-end/"), std::nullopt);
  for (const char* key :
       {"rdzv/job/join/5/", "rdzv/job/join/5/0", "rdzv/job/join/5/-1",
        "rdzv/job/join/5/+2", "rdzv/job/join/5/ 2", "rdzv/job/join/5/2x",
        "rdzv/job/join/5/2/3", "rdzv/job/join/50/2", "rdzv/job/joined/5",
        "rdzv/job/join/5/99999999999999999999"}) {
    EXPECT_EQ(k.ParseJoin(key, 5), std::nullopt) << key;
  }
  for (const char* key :
       {"rdzv/job/members/5/c/", "rdzv/job/members/5/c/-1",
        "rdzv/job/members/5/c/1x", "rdzv/job/members/5/d/1",
        "rdzv/job/members/6/c/1", "rdzv/job/members/5/c/1/2"}) {
    EXPECT_EQ(k.ParseMembers(key, 5, "c"), std::nullopt) << key;
  }
}

}  // namespace
}  // namespace distjob
