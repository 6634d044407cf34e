#include "agent/worker_store.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// One batch pass over a fixed table; counts the passes and keeps the last
// one's names and options.
struct FakeDns {
  std::map<std::string, std::vector<std::string>> table;
  int passes = 0;
  std::vector<std::string> names;
  absl::Duration pass_timeout;

  WorkerStore::Resolve Resolver() {
    return [this](const std::vector<std::string>& asked,
                  const ResolverOptions& options) -> absl::StatusOr<Addresses> {
      ++passes;
      names = asked;
      pass_timeout = options.pass_timeout;
      Addresses out;
      for (const std::string& name : asked) {
        auto it = table.find(name);
        out[name] = it == table.end() ? std::vector<std::string>{} : it->second;
      }
      return out;
    };
  }
};

constexpr absl::Duration kTimeout = absl::Seconds(10);

TEST(WorkerStoreTest, WithoutATokenAnyoneMayConnect) {
  FakeDns dns;
  WorkerStore store(/*restrict_peers=*/false, /*connections=*/0,
                    dns.Resolver());
  MemberAdmission admission;
  auto status = store.AllowMembers({"10.0.0.1"}, kTimeout, nullptr, &admission);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(admission.members_only);
  EXPECT_THAT(store.AllowedPeers(), IsEmpty());
  EXPECT_EQ(dns.passes, 0);
}

TEST(WorkerStoreTest, WithATokenOnlyLoopbackBeforeAnyRound) {
  FakeDns dns;
  WorkerStore store(/*restrict_peers=*/true, /*connections=*/0, dns.Resolver());
  EXPECT_THAT(store.AllowedPeers(), ElementsAre("127.0.0.1", "::1"));
}

TEST(WorkerStoreTest, MembersAreResolvedAndReplacedEachRound) {
  FakeDns dns;
  dns.table = {{"pod-0.job", {"10.0.0.1", "fd00::1"}},
               {"pod-1.job", {"10.0.0.2"}},
               {"10.0.0.3", {"10.0.0.3"}}};
  WorkerStore store(/*restrict_peers=*/true, /*connections=*/0, dns.Resolver());
  MemberAdmission admission;
  auto status = store.AllowMembers({"pod-0.job", "pod-1.job"}, kTimeout,
                                   nullptr, &admission);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(admission.members_only);
  EXPECT_EQ(admission.admitted, 2);
  EXPECT_THAT(admission.unresolved, IsEmpty());
  EXPECT_THAT(store.AllowedPeers(), ElementsAre("10.0.0.1", "10.0.0.2",
                                                "127.0.0.1", "::1", "fd00::1"));
  // A node left: its addresses are no longer admitted; a name that does
  // not resolve admits nothing.
  status = store.AllowMembers({"10.0.0.3", "gone.job"}, kTimeout, nullptr,
                              &admission);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(admission.admitted, 1);
  EXPECT_THAT(admission.unresolved, ElementsAre("gone.job"));
  EXPECT_THAT(store.AllowedPeers(),
              ElementsAre("10.0.0.3", "127.0.0.1", "::1"));
}

// Thousands of members: one pass over all their names (the resolver sends
// every query at once), bounded by the configured timeout.
TEST(WorkerStoreTest, AllMembersResolvedInOnePass) {
  FakeDns dns;
  std::vector<std::string> members;
  for (int i = 0; i < 3000; ++i) {
    const std::string name = absl::StrCat("pod-", i, ".job");
    members.push_back(name);
    dns.table[name] = {absl::StrCat("10.1.", i / 256, ".", i % 256)};
  }
  WorkerStore store(/*restrict_peers=*/true, /*connections=*/0, dns.Resolver());
  MemberAdmission admission;
  auto status = store.AllowMembers(members, absl::Milliseconds(2500), nullptr,
                                   &admission);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(dns.passes, 1);
  EXPECT_EQ(dns.names.size(), 3000u);
  EXPECT_EQ(dns.pass_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(admission.admitted, 3000);
  EXPECT_EQ(store.AllowedPeers().size(), 3002u);
}

// The injected clock (WorkerStore::Clock is a plain function).
absl::Time fake_now;
absl::Time FakeNow() { return fake_now; }

// A pass as common/resolver runs one: answers arrive over time while it
// polls `cancelled` between them; whatever has not answered when the pass
// ends has no address.
WorkerStore::Resolve SlowDns(absl::Time* now, absl::Duration per_name) {
  return [now, per_name](
             const std::vector<std::string>& names,
             const ResolverOptions& options) -> absl::StatusOr<Addresses> {
    Addresses out;
    for (const std::string& name : names) out[name] = {};
    for (const std::string& name : names) {
      if (options.cancelled && options.cancelled()) break;
      *now += per_name;
      out[name] = {"10.9.9.9"};
    }
    return out;
  };
}

TEST(WorkerStoreTest, TheTimeoutBoundsThePass) {
  fake_now = absl::UnixEpoch();
  WorkerStore store(/*restrict_peers=*/true, /*connections=*/0,
                    SlowDns(&fake_now, absl::Seconds(1)), FakeNow);
  std::vector<std::string> members;
  for (int i = 0; i < 100; ++i) members.push_back(absl::StrCat("n", i));
  MemberAdmission admission;
  auto status =
      store.AllowMembers(members, absl::Seconds(3), nullptr, &admission);
  ASSERT_TRUE(status.ok()) << status;
  // Three answers fit in the three seconds; the rest are not admitted.
  EXPECT_EQ(admission.admitted, 3);
  EXPECT_EQ(admission.unresolved.size(), 97u);
  EXPECT_EQ(fake_now, absl::UnixEpoch() + absl::Seconds(3));
  EXPECT_THAT(store.AllowedPeers(),
              ElementsAre("10.9.9.9", "127.0.0.1", "::1"));
}

TEST(WorkerStoreTest, CancelEndsThePassAndKeepsTheLastAllowList) {
  fake_now = absl::UnixEpoch();
  WorkerStore store(/*restrict_peers=*/true, /*connections=*/0,
                    SlowDns(&fake_now, absl::Milliseconds(1)), FakeNow);
  std::vector<std::string> members;
  for (int i = 0; i < 1000; ++i) members.push_back(absl::StrCat("n", i));
  // The rendezvous is cancelled (a stop signal) five answers into the pass.
  int polls = 0;
  MemberAdmission admission;
  auto status = store.AllowMembers(
      members, absl::Hours(1), [&polls] { return ++polls > 5; }, &admission);
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
  EXPECT_LE(fake_now, absl::UnixEpoch() + absl::Milliseconds(6));
  EXPECT_THAT(store.AllowedPeers(), ElementsAre("127.0.0.1", "::1"));
}

TEST(WorkerStoreTest, NotServingHasNoStats) {
  FakeDns dns;
  WorkerStore store(/*restrict_peers=*/false, /*connections=*/0,
                    dns.Resolver());
  EXPECT_FALSE(store.Stats().has_value());
  store.Stop();  // nothing to stop
  EXPECT_FALSE(store.Stats().has_value());
}

TEST(WorkerStoreTest, ServesOncePortKeptUntilStopped) {
  FakeDns dns;
  WorkerStore store(/*restrict_peers=*/true, /*connections=*/0, dns.Resolver());
  auto port = store.Serve("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  // Every later round (and worker restart) gets the same store.
  auto again = store.Serve("127.0.0.1", 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *port);
  EXPECT_TRUE(store.Stats().has_value());
  store.Stop();
  EXPECT_FALSE(store.Stats().has_value());
}

}  // namespace
}  // namespace distjob
