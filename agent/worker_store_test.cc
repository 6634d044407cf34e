#include "agent/worker_store.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

WorkerStore::Resolve FakeDns(
    std::map<std::string, std::vector<std::string>> names) {
  return
      [names](
          const std::string& host) -> absl::StatusOr<std::vector<std::string>> {
        auto it = names.find(host);
        if (it == names.end()) {
          return absl::NotFoundError(host + " does not resolve");
        }
        return it->second;
      };
}

TEST(WorkerStoreTest, WithoutATokenAnyoneMayConnect) {
  WorkerStore store(/*restrict_peers=*/false, FakeDns({}));
  store.AllowMembers({"10.0.0.1"});
  EXPECT_THAT(store.AllowedPeers(), IsEmpty());
}

TEST(WorkerStoreTest, WithATokenOnlyLoopbackBeforeAnyRound) {
  WorkerStore store(/*restrict_peers=*/true, FakeDns({}));
  EXPECT_THAT(store.AllowedPeers(), ElementsAre("127.0.0.1", "::1"));
}

TEST(WorkerStoreTest, MembersAreResolvedAndReplacedEachRound) {
  WorkerStore store(
      /*restrict_peers=*/true, FakeDns({{"pod-0.job", {"10.0.0.1", "fd00::1"}},
                                        {"pod-1.job", {"10.0.0.2"}},
                                        {"10.0.0.3", {"10.0.0.3"}}}));
  store.AllowMembers({"pod-0.job", "pod-1.job"});
  EXPECT_THAT(store.AllowedPeers(), ElementsAre("10.0.0.1", "10.0.0.2",
                                                "127.0.0.1", "::1", "fd00::1"));
  // A node left: its addresses are no longer admitted; a name that does
  // not resolve admits nothing.
  store.AllowMembers({"10.0.0.3", "gone.job"});
  EXPECT_THAT(store.AllowedPeers(),
              ElementsAre("10.0.0.3", "127.0.0.1", "::1"));
}

TEST(WorkerStoreTest, NotServingHasNoStats) {
  WorkerStore store(/*restrict_peers=*/false, FakeDns({}));
  EXPECT_FALSE(store.Stats().has_value());
  store.Stop();  // nothing to stop
  EXPECT_FALSE(store.Stats().has_value());
}

TEST(WorkerStoreTest, ServesOncePortKeptUntilStopped) {
  WorkerStore store(/*restrict_peers=*/true, FakeDns({}));
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
