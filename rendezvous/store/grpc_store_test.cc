#include <thread>

#include "gtest/gtest.h"
#include "rendezvous/store/grpc_store_client.h"
#include "rendezvous/store/store_server.h"

namespace distjob {
namespace {

TEST(GrpcStoreTest, RoundTripsEveryOperation) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(
      "127.0.0.1:" + std::to_string((*server)->port()), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  ASSERT_TRUE(client->Set("a", "1").ok());
  EXPECT_EQ(*client->Get("a", absl::ZeroDuration()), "1");
  EXPECT_EQ(*client->Add("c", 3), 3);
  EXPECT_FALSE(client->CompareSet("a", "x", "y")->swapped);
  EXPECT_EQ(*client->Append("a", "2"), 2);
  EXPECT_TRUE(*client->Check({"a", "c"}));
  EXPECT_EQ(*client->NumKeys(), 2);
  auto listing = client->List("");
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->entries.size(), 2u);
  EXPECT_EQ(*client->Delete({"a"}), 1);
  std::thread setter([&] {
    auto other = GrpcStoreClient::Connect(
        "127.0.0.1:" + std::to_string((*server)->port()), absl::Seconds(5));
    ASSERT_TRUE(other->Set("late", "v").ok());
  });
  EXPECT_EQ(*client->Get("late", absl::Seconds(10)), "v");
  setter.join();
  auto w = client->Watch("", listing->revision, absl::Seconds(5));
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->first);
}

TEST(GrpcStoreTest, StatsCountRequestsByMethodAndCode) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(
      "127.0.0.1:" + std::to_string((*server)->port()), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  ASSERT_TRUE(client->Set("a", "1").ok());
  ASSERT_TRUE(client->Set("b", "2").ok());
  EXPECT_FALSE(client->Get("missing", absl::Milliseconds(20)).ok());
  const StoreStats stats = (*server)->Stats();
  EXPECT_EQ(stats.keys, 2);
  auto count = [&](const std::string& method, const std::string& code) {
    for (const StoreRequestCount& r : stats.requests) {
      if (r.method == method && r.code == code) return r.count;
    }
    return int64_t{0};
  };
  EXPECT_EQ(count("Set", "OK"), 2);
  int64_t failed_gets = 0;
  for (const StoreRequestCount& r : stats.requests) {
    if (r.method == "Get" && r.code != "OK") failed_gets += r.count;
  }
  EXPECT_EQ(failed_gets, 1);
}

TEST(GrpcStoreTest, SecondServerOnTheSamePortFails) {
  auto first = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = StoreServer::Start("127.0.0.1", (*first)->port());
  EXPECT_FALSE(second.ok());
}

TEST(GrpcStoreTest, OversizedValueGetsAClearStatus) {
  StoreLimits limits;
  limits.max_value_bytes = 10;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok());
  auto client = GrpcStoreClient::Connect(
      "127.0.0.1:" + std::to_string((*server)->port()), absl::Seconds(5));
  auto s = client->Set("k", std::string(100, 'x'));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GrpcStoreTest, UnreachableStoreFailsAfterTheTimeout) {
  auto client =
      GrpcStoreClient::Connect("127.0.0.1:1", absl::Milliseconds(300));
  auto s = client->Set("k", "v");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace distjob
