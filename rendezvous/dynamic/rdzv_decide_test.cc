#include "rendezvous/dynamic/rdzv_decide.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distjob {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000);

// A node of a 2..4 job, 20 s before its join_timeout, in no round yet.
Progress Fresh() {
  Progress p;
  p.now = kNow;
  p.deadline = kNow + absl::Seconds(20);
  p.min_nodes = 2;
  p.max_nodes = 4;
  p.last_call_timeout = absl::Seconds(1);
  p.keep_alive_interval = absl::Seconds(1);
  return p;
}

// A read of round `round`, open or closed by "c", with no error.
Observed Read(int64_t round, bool closed) {
  Observed o;
  o.fresh = true;
  o.state.round = round;
  o.state.closed = closed;
  if (closed) {
    o.state.closer = "c";
    o.state.size = 2;
    o.state.world_size = 2;
  }
  return o;
}

Observed Member(int64_t round) {
  Observed o = Read(round, true);
  o.mine = RankRecord{1, 1, "n0"};
  return o;
}

// This node joined open round `round` at `index`, its record written.
Progress Joined(int64_t round, int64_t index) {
  Progress p = Fresh();
  p.joined_round = round;
  p.join_index = index;
  p.join_written = true;
  p.joined_at = kNow - absl::Milliseconds(100);
  return p;
}

struct Row {
  std::string name;
  Observed observed;
  Progress progress;
  Action::Kind want;
  // Checks the action's fields beyond its kind.
  std::function<void(const Action&)> check = [](const Action&) {};
};

std::vector<Row> Rows() {
  std::vector<Row> rows;
  auto add = [&](std::string name, Observed o, Progress p, Action::Kind want,
                 std::function<void(const Action&)> check = nullptr) {
    Row r{std::move(name), std::move(o), p, want};
    if (check) r.check = std::move(check);
    rows.push_back(std::move(r));
  };
  {
    add("a new node: join round 0 and read", Observed{}, Fresh(),
        Action::kJoinFirstRound);
    add("nothing read since joining: read", Observed{}, Joined(0, 1),
        Action::kObserve);
    Progress returned = Fresh();
    returned.last_round = 2;  // it held a round: the job is past round 0
    add("nothing read since its last round: read", Observed{}, returned,
        Action::kObserve);
    Progress p = Fresh();
    p.cancelled = true;
    p.store_lost = true;
    add("cancelled before anything else", Observed{}, p, Action::kCancelled);
    p.cancelled = false;
    add("store lost", Observed{}, p, Action::kStoreLost);
    p = Fresh();
    p.deadline = kNow;
    add("join_timeout passed", Observed{}, p, Action::kTimedOut);
    // A fresh read is decided on even past the deadline (it was read in
    // time).
    add("fresh read past the deadline", Read(0, false), p, Action::kJoin);
  }
  {
    Observed o = Member(3);
    o.aborted = "node n1 exited";
    add("another node ended the job", o, Fresh(), Action::kEndJob);
    o = Observed{};
    o.fresh = true;
    o.state_error = absl::UnavailableError("connection refused");
    add("store not up yet", o, Fresh(), Action::kReconnect);
    o.state_error = absl::DataLossError("malformed rendezvous state line");
    add("malformed state", o, Fresh(), Action::kFail,
        [](const Action& a) { EXPECT_TRUE(absl::IsDataLoss(a.status)); });
    o.state_error = absl::InvalidArgumentError("key too long");
    add("rejected read", o, Fresh(), Action::kFail, [](const Action& a) {
      EXPECT_TRUE(absl::IsInvalidArgument(a.status));
    });
    o = Read(3, true);
    o.malformed = absl::DataLossError("malformed rank record");
    add("malformed rank record", o, Fresh(), Action::kFail);
    o = Read(3, true);
    o.rank_error = absl::UnavailableError("timeout");
    add("rank record unreadable", o, Fresh(), Action::kRetryRead);
  }
  {
    Progress p = Fresh();
    p.last_round = 2;
    add("member of a new round", Member(3), p, Action::kReturnResult);
    p.last_round = 3;
    add("member of the round it ran: open the next", Member(3), p,
        Action::kOpenNextRound,
        [](const Action& a) { EXPECT_FALSE(a.forget_decider); });
    p.decider_round = 3;
    Observed o = Member(3);
    o.decider_alive = true;
    add("another node's failure decides", o, p, Action::kAwaitDecider);
    o.decider_alive = false;
    add("the decider is gone", o, p, Action::kOpenNextRound,
        [](const Action& a) { EXPECT_TRUE(a.forget_decider); });
    o.decider_alive.reset();
    add("cannot tell whether the decider lives", o, p, Action::kOpenNextRound,
        [](const Action& a) { EXPECT_FALSE(a.forget_decider); });
  }
  {
    Observed o = Read(3, true);
    add("outside a closed round, members unknown", o, Fresh(),
        Action::kWaitForNextRound);
    o.members_alive = true;
    add("outside a closed round, members alive", o, Fresh(),
        Action::kWaitForNextRound);
    o.members_alive = false;
    add("outside a closed round, every member gone", o, Fresh(),
        Action::kOpenNextRound);
    Progress p = Joined(3, 5);  // past max_nodes: full
    add("open round full", Read(3, false), p, Action::kWaitForNextRound);
  }
  {
    add("open round not joined", Read(3, false), Fresh(), Action::kJoin);
    add("joined an older round", Read(3, false), Joined(2, 1), Action::kJoin);
    Progress p = Joined(3, 1);
    p.join_written = false;
    add("place taken, record not written", Read(3, false), p,
        Action::kWriteJoinRecord);
    p = Joined(3, 4);
    p.pending_restarts = 1;
    add("a restart to note before closing", Read(3, false), p,
        Action::kNoteRestarts);
  }
  {
    add("filled the round", Read(3, false), Joined(3, 4), Action::kCloseRound,
        [](const Action& a) { EXPECT_FALSE(a.announce_last_call); });
    add("min_nodes joined: last call", Read(3, false), Joined(3, 2),
        Action::kAwaitLastCall, [](const Action& a) {
          EXPECT_TRUE(a.announce_last_call);
          EXPECT_EQ(a.until, kNow + absl::Milliseconds(900));
        });
    Progress p = Joined(3, 2);
    p.announced_round = 3;
    add("last call announced already", Read(3, false), p,
        Action::kAwaitLastCall,
        [](const Action& a) { EXPECT_FALSE(a.announce_last_call); });
    p = Joined(3, 3);
    add("past min_nodes: last call, not announced", Read(3, false), p,
        Action::kAwaitLastCall,
        [](const Action& a) { EXPECT_FALSE(a.announce_last_call); });
    p.joined_at = kNow - absl::Seconds(1);
    add("last call over", Read(3, false), p, Action::kCloseRound);
  }
  {
    Progress p = Joined(3, 1);
    p.deadline = kNow + absl::Seconds(600);
    // Until the deadline nears, only a change of the state wakes it.
    add("fewer than min_nodes", Read(3, false), p, Action::kWaitForJoiners,
        [](const Action& a) {
          EXPECT_FALSE(a.follow_joiners);
          EXPECT_EQ(a.until, kNow + absl::Seconds(598));
        });
    p.deadline = kNow + absl::Seconds(2);
    add("fewer than min_nodes, deadline near", Read(3, false), p,
        Action::kWaitForJoiners, [](const Action& a) {
          EXPECT_TRUE(a.follow_joiners);
          EXPECT_EQ(a.until, kNow + absl::Seconds(1));
        });
  }
  return rows;
}

// A read, a join (which carries the lease), a reconnect's or waiting
// node's heartbeat and a step that returns an error need no renewal
// before them; every other step renews a due lease first.
TEST(RdzvDecideTest, WhichStepsRenewADueLeaseFirst) {
  for (int k = 0; k < kNumActionKinds; ++k) {
    const auto kind = static_cast<Action::Kind>(k);
    const bool without =
        kind == Action::kObserve || kind == Action::kJoin ||
        kind == Action::kJoinFirstRound || kind == Action::kReconnect ||
        kind == Action::kWaitForNextRound || kind == Action::kCancelled ||
        kind == Action::kStoreLost || kind == Action::kTimedOut ||
        kind == Action::kFail || kind == Action::kEndJob;
    EXPECT_EQ(RenewsLeaseFirst(kind), !without) << ActionName(kind);
  }
}

TEST(RdzvDecideTest, EachObservationAndProgressGiveOneAction) {
  std::set<Action::Kind> covered;
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    const Action a = Decide(row.observed, row.progress);
    EXPECT_EQ(a.kind, row.want)
        << ActionName(a.kind) << " instead of " << ActionName(row.want);
    row.check(a);
    covered.insert(row.want);
  }
  EXPECT_EQ(covered.size(), static_cast<size_t>(kNumActionKinds));
}

}  // namespace
}  // namespace distjob
