#include "rendezvous/dynamic/node_lease.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

constexpr absl::Duration kLease = absl::Seconds(30);
constexpr absl::Duration kInterval = absl::Seconds(5);

// A store whose deletes fail while `refuse_deletes` is set: the store
// unreachable for a moment.
class FlakyDeleteStore : public LocalStore {
 public:
  using LocalStore::LocalStore;
  absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override {
    if (refuse_deletes) return absl::UnavailableError("store unreachable");
    return LocalStore::Delete(keys);
  }
  bool refuse_deletes = false;
};

class NodeLeaseTest : public ::testing::Test {
 protected:
  bool Has(const std::string& key) {
    auto listing = core_.List(key);
    return listing.ok() && !listing->entries.empty() &&
           listing->entries[0].key == key;
  }

  StoreCore core_;
  FlakyDeleteStore store_{&core_};
  const RdzvKeys keys_{"job"};
  NodeLease lease_{&store_, &keys_, "n0", kLease, kInterval};
};

TEST_F(NodeLeaseTest, ARenewalWritesTheAliveKeyAndTheAskWhileThereIsOne) {
  ASSERT_TRUE(lease_.Renew().ok());
  EXPECT_TRUE(Has(keys_.Alive("n0")));
  EXPECT_FALSE(Has(keys_.Waiting("n0")));

  EXPECT_TRUE(lease_.Ask("3 closed"));
  ASSERT_TRUE(lease_.Renew().ok());
  auto ask = core_.List(keys_.Waiting("n0"));
  ASSERT_TRUE(ask.ok());
  ASSERT_EQ(ask->entries.size(), 1u);
  EXPECT_EQ(ask->entries[0].value, "3 closed");
}

TEST_F(NodeLeaseTest, OnlyAChangedAskIsToBeWritten) {
  EXPECT_TRUE(lease_.Ask("3 full"));
  EXPECT_FALSE(lease_.Ask("3 full"));
  EXPECT_TRUE(lease_.Ask("3 closed"));
}

TEST_F(NodeLeaseTest, StoppingDeletesTheAskAndTheNextRenewalLeavesItOut) {
  lease_.Ask("1 closed");
  ASSERT_TRUE(lease_.Renew().ok());
  ASSERT_TRUE(Has(keys_.Waiting("n0")));
  lease_.StopAsking();
  EXPECT_FALSE(Has(keys_.Waiting("n0")));
  ASSERT_TRUE(lease_.Renew().ok());
  EXPECT_FALSE(Has(keys_.Waiting("n0")));
  EXPECT_TRUE(lease_.Ask("1 closed")) << "asking again writes anew";
}

TEST_F(NodeLeaseTest, AFailedWithdrawalIsDeletedAgainAtTheNextRenewal) {
  lease_.Ask("1 closed");
  ASSERT_TRUE(lease_.Renew().ok());
  store_.refuse_deletes = true;
  lease_.StopAsking();
  ASSERT_TRUE(Has(keys_.Waiting("n0"))) << "the delete failed";
  ASSERT_TRUE(lease_.Renew().ok());
  EXPECT_TRUE(Has(keys_.Waiting("n0"))) << "still refused";
  store_.refuse_deletes = false;
  ASSERT_TRUE(lease_.Renew().ok());
  EXPECT_FALSE(Has(keys_.Waiting("n0")))
      << "a renewal deletes the ask a failed withdrawal left";
}

TEST_F(NodeLeaseTest, RenewalTimesComeFromTheCallsStart) {
  const absl::Time before = absl::Now();
  EXPECT_FALSE(lease_.RenewedSince(before));
  EXPECT_FALSE(lease_.RenewedWithin(absl::Hours(1)));
  ASSERT_TRUE(lease_.Renew().ok());
  EXPECT_TRUE(lease_.RenewedSince(before));
  EXPECT_TRUE(lease_.RenewedWithin(absl::Hours(1)));
  EXPECT_FALSE(lease_.RenewedSince(absl::Now() + absl::Seconds(1)));

  // A join's write with the lease counts as a renewal.
  const absl::Time later = absl::Now() + absl::Minutes(1);
  lease_.NoteRenewed(later);
  EXPECT_EQ(lease_.NextRenewal(absl::InfinitePast()), later + kInterval);
  // After a failed attempt past the last renewal: one interval after it.
  const absl::Time attempt = later + absl::Minutes(1);
  EXPECT_EQ(lease_.NextRenewal(attempt), attempt + kInterval);
}

}  // namespace
}  // namespace distjob
