#include <thread>
#include <vector>

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

// Every RPC of the protocol, through `client`; each must be refused.
void ExpectEveryCallRefused(GrpcStoreClient* client, absl::string_view says) {
  std::vector<absl::Status> answers = {
      client->Set("a", "evil").status(),
      client->Get("a", absl::Seconds(1)).status(),
      client->Add("n", 5).status(),
      client->CompareSet("a", "1", "evil").status(),
      client->Append("a", "evil").status(),
      client->Check({"a"}).status(),
      client->Delete({"a"}).status(),
      client->NumKeys().status(),
      client->List("").status(),
      client->Watch("", 0, absl::Seconds(1)).status(),
      client->WaitUntilReachable(absl::Seconds(5)),
  };
  for (const absl::Status& s : answers) {
    EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
    EXPECT_NE(s.message().find(says), absl::string_view::npos) << s;
    EXPECT_EQ(s.message().find("s3cret-token"), absl::string_view::npos) << s;
  }
}

TEST(GrpcStoreTest, TokenIsRequiredOnEveryCallAndRefusalsChangeNothing) {
  StoreSecurity security;
  security.token = "s3cret-token";
  auto server = StoreServer::Start("127.0.0.1", 0, {}, security);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string endpoint = "127.0.0.1:" + std::to_string((*server)->port());
  auto good = GrpcStoreClient::Connect(endpoint, absl::Seconds(5), security);
  ASSERT_TRUE(good->WaitUntilReachable(absl::Seconds(5)).ok());
  ASSERT_TRUE(good->Set("a", "1").ok());
  ASSERT_TRUE(good->Set("n", "2").ok());
  const int64_t revision = good->List("")->revision;

  auto none = GrpcStoreClient::Connect(endpoint, absl::Seconds(5));
  ExpectEveryCallRefused(none.get(), "requires a token");
  StoreSecurity wrong;
  wrong.token = "s3cret-tokeN";
  auto guess = GrpcStoreClient::Connect(endpoint, absl::Seconds(5), wrong);
  ExpectEveryCallRefused(guess.get(), "refused this agent's token");

  auto listing = good->List("");
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->revision, revision);
  ASSERT_EQ(listing->entries.size(), 2u);
  EXPECT_EQ(*good->Get("a", absl::ZeroDuration()), "1");
  EXPECT_EQ(*good->Get("n", absl::ZeroDuration()), "2");
  bool refused_counted = false;
  for (const auto& r : (*server)->Stats().requests) {
    if (r.code == "UNAUTHENTICATED") refused_counted = true;
  }
  EXPECT_TRUE(refused_counted);
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
