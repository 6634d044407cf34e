// EtcdStore's operations against a real etcd.
#include "rendezvous/store/etcd/store.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/etcd_fixture.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {
namespace {

TEST_F(EtcdStoreTest, RoundTripsEveryOperation) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("a", "1").ok());
  EXPECT_EQ(*store->Get("a", absl::ZeroDuration()), "1");
  EXPECT_EQ(*store->Add("c", 3), 3);
  EXPECT_EQ(*store->Add("c", -1), 2);
  EXPECT_EQ(store->Add("a", 1).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(store->Add("s", 0).status().code(), absl::StatusCode::kOk);
  ASSERT_TRUE(store->Set("t", "text").ok());
  EXPECT_EQ(store->Add("t", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store->Append("t", "!"), 5);
  EXPECT_TRUE(*store->Check({"a", "c"}));
  EXPECT_FALSE(*store->Check({"a", "nope"}));
  EXPECT_EQ(*store->NumKeys(), 4);
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->entries.size(), 4u);
  EXPECT_EQ(listing->entries[0].key, "a");
  // A page holds at most `limit` entries, and says when more follow.
  auto page = store->ListPage("", "", 3);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 3u);
  EXPECT_TRUE(page->more);
  page = store->ListPage("", page->entries.back().key, 3);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].key, "t");
  EXPECT_FALSE(page->more);
  EXPECT_EQ(*store->Delete({"a", "missing"}), 1);
  EXPECT_EQ(store->Get("a", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Get("a", absl::Milliseconds(300)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(EtcdStoreTest, CompareSetFollowsTcpStoreSemantics) {
  auto store = Open("job");
  auto r = store->CompareSet("k", "x", "y");
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "x");  // missing key, non-empty expectation
  r = store->CompareSet("k", "", "v1");
  EXPECT_TRUE(r->swapped);
  r = store->CompareSet("k", "", "v2");
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "v1");
  r = store->CompareSet("k", "v1", "v2");
  EXPECT_TRUE(r->swapped);
  EXPECT_EQ(*store->Get("k", absl::ZeroDuration()), "v2");
}

// A round's rank records and join records go in one request per 1,024
// (rendezvous/dynamic/dynamic_rendezvous.cc); etcd takes at most 128
// operations a transaction by default.
TEST_F(EtcdStoreTest, RequestsOfMoreKeysThanEtcdTakesInOneTxnAreSplit) {
  auto store = Open("job");
  std::vector<std::pair<std::string, std::string>> kvs;
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) {
    kvs.emplace_back(absl::StrCat("rank/", i), absl::StrCat(i));
    keys.push_back(kvs.back().first);
  }
  ASSERT_TRUE(store->MultiSet(kvs, absl::ZeroDuration()).ok());
  auto values = store->MultiGet(keys, absl::ZeroDuration());
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 300u);
  EXPECT_EQ((*values)[299], "299");
  EXPECT_TRUE(*store->Check(keys));
  keys.push_back("rank/missing");
  EXPECT_FALSE(*store->Check(keys));
  EXPECT_EQ(store->MultiGet(keys, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*store->Delete(keys), 300);
  EXPECT_EQ(*store->NumKeys(), 0);
}

TEST_F(EtcdStoreTest, RunIdsAndPrefixesAreSeparateNamespaces) {
  auto a = Open("job-a");
  auto b = Open("job-b");
  auto c = Open("job-a", "etcd_prefix=/other");
  ASSERT_TRUE(a->Set("k", "a").ok());
  ASSERT_TRUE(b->Set("k", "b").ok());
  EXPECT_EQ(*a->Get("k", absl::ZeroDuration()), "a");
  EXPECT_EQ(*b->Get("k", absl::ZeroDuration()), "b");
  EXPECT_FALSE(*c->Check({"k"}));
}

TEST(EtcdOptionsTest, UnreadableCaCertIsAnInvalidArgument) {
  auto o = ParseEtcdOptions("h", "ca_cert=/nonexistent.pem", "r");
  ASSERT_TRUE(o.ok());
  auto s = EtcdStore::Connect(*o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("/nonexistent.pem"), std::string::npos);
}

}  // namespace
}  // namespace distjob
