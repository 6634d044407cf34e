#include "rendezvous/dynamic/exit_barrier.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

constexpr absl::Duration kInterval = absl::Milliseconds(50);

// Round 3 of "job", closed by n0, with `members` as n0 wrote them; this
// node is n0, whose agent does not host the store (unless `hosting`).
class ExitBarrierTest : public ::testing::Test {
 protected:
  RdzvState Round(const std::vector<std::string>& members) {
    std::vector<RdzvParticipant> list;
    for (const auto& m : members) list.emplace_back(m, 1, "10.0.0.1");
    for (const auto& [first, text] : EncodeMemberChunks(list)) {
      EXPECT_TRUE(store_.Set(keys_.Members(3, "n0", first), text).ok());
    }
    RdzvState st;
    st.round = 3;
    st.closed = true;
    st.closer = "n0";
    st.size = static_cast<int>(members.size());
    st.world_size = st.size;
    return st;
  }
  // Node `node` holds a lease of a minute.
  void Alive(const std::string& node) {
    ASSERT_TRUE(store_.Set(keys_.Alive(node), "1", absl::Minutes(1)).ok());
  }
  std::string Value(const std::string& key) {
    auto v = store_.Get(key, absl::ZeroDuration());
    return v.ok() ? *v : "";
  }
  ExitBarrier::Deps Deps(bool hosting = false,
                         absl::Duration lease = 3 * kInterval) {
    ExitBarrier::Deps d;
    d.store = &store_;
    d.keys = &keys_;
    d.node = "n0";
    d.hosting = hosting;
    d.exit_barrier_timeout = absl::Seconds(20);
    d.keep_alive_interval = kInterval;
    d.lease = lease;
    d.wait_status = &wait_status_;
    d.store_lost = &store_lost_;
    d.cancelled = &cancelled_;
    return d;
  }

  StoreCore core_;
  LocalStore store_{&core_};
  const RdzvKeys keys_{"job"};
  WaitStatus wait_status_;
  std::atomic<bool> store_lost_{false};
  std::atomic<bool> cancelled_{false};
};

TEST_F(ExitBarrierTest, TheLastMarkSaysAllAreDone) {
  const RdzvState round = Round({"n0", "n1"});
  ASSERT_TRUE(store_.Set(keys_.Done(3, "n1"), "1").ok());
  ASSERT_TRUE(store_.Add(keys_.DoneCount(3), 1).ok());
  ExitBarrier(Deps()).LeaveSucceeded(round);
  EXPECT_EQ(Value(keys_.Done(3, "n0")), "1");
  EXPECT_EQ(Value(keys_.DoneCount(3)), "2");
  EXPECT_EQ(Value(keys_.DoneAll(3)), "1");
  // A member's goodbye, counted for the host.
  EXPECT_EQ(Value(keys_.Left(3)), "1");
}

TEST_F(ExitBarrierTest, AMemberWithoutALeaseIsNotWaitedFor) {
  // n1 never marks itself and holds no lease: it died. The barrier ends
  // once the leases are looked at, long before exit_barrier_timeout.
  const RdzvState round = Round({"n0", "n1"});
  const absl::Time start = absl::Now();
  ExitBarrier(Deps()).LeaveSucceeded(round);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(Value(keys_.DoneAll(3)), "");
  EXPECT_FALSE(store_lost_);
}

TEST_F(ExitBarrierTest, UnfinishedNamesTheMembersNotDone) {
  const RdzvState round = Round({"n0", "n1", "n2"});
  ASSERT_TRUE(store_.Set(keys_.Done(3, "n2"), "1").ok());
  EXPECT_EQ(ExitBarrier(Deps()).Unfinished(round), "n1");
}

TEST_F(ExitBarrierTest, TheHostEndingTheJobWaitsUntilTheEndIsRead) {
  const RdzvState round = Round({"n0", "n1"});
  Alive("n1");
  // A lease long enough that only n1's mark ends the host's wait.
  ExitBarrier host(Deps(/*hosting=*/true, absl::Seconds(20)));
  std::atomic<bool> read{false};
  std::thread reader([&] {
    // n1 reads the end once it is there, and says so.
    ASSERT_TRUE(store_.Get(keys_.Aborted(), absl::Seconds(10)).ok());
    read = true;
    ASSERT_TRUE(store_.Set(keys_.SeenEnd("n1"), "1").ok());
  });
  const absl::Time start = absl::Now();
  host.EndJob(round, "node n0 exited");
  EXPECT_TRUE(read);
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  reader.join();
  EXPECT_EQ(Value(keys_.Aborted()), "node n0 exited");
}

TEST_F(ExitBarrierTest, AcknowledgeEndMarksTheEndReadOnce) {
  ExitBarrier barrier(Deps());
  barrier.AcknowledgeEnd();
  EXPECT_EQ(Value(keys_.SeenEnd("n0")), "1");
  ASSERT_TRUE(store_.Set(keys_.SeenEnd("n0"), "gone").ok());
  barrier.AcknowledgeEnd();  // already said: no second write
  EXPECT_EQ(Value(keys_.SeenEnd("n0")), "gone");
}

}  // namespace
}  // namespace distjob
