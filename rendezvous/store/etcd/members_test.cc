// Fail-over between the cluster's members.
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
#include "rendezvous/store/etcd/store.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {
namespace {

TEST_F(EtcdStoreTest, DeadEndpointsAreSkipped) {
  auto o = ParseEtcdOptions("127.0.0.1:1," + endpoint_, "", "job");
  ASSERT_TRUE(o.ok());
  o->rpc_timeout = absl::Seconds(10);
  auto store = EtcdStore::Connect(*o);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Set("k", "v").ok());
  EXPECT_EQ(*(*store)->Get("k", absl::ZeroDuration()), "v");
}

// After a failure at the last member the client must go on to the first:
// a client that had failed over through every member once (its members
// lost the leader in turn) then kept retrying one dead member until its
// budget ran out (bench/run.py, etcd leader loss).
TEST_F(EtcdStoreTest, FailOverWrapsAroundTheMemberList) {
  auto o = ParseEtcdOptions("127.0.0.1:1," + endpoint_, "", "job");
  ASSERT_TRUE(o.ok());
  o->rpc_timeout = absl::Seconds(5);
  auto store = EtcdStore::Connect(*o);
  ASSERT_TRUE(store.ok());
  // Fails at the dead first member, then succeeds at the live second.
  ASSERT_TRUE((*store)->Set("k", "v").ok());
  {
    // A call whose caller's deadline has passed fails at the live member
    // with a retryable error: the client moves past the end of the list.
    ScopedCallDeadline spent(absl::Now() - absl::Seconds(1));
    EXPECT_FALSE((*store)->Get("k", absl::ZeroDuration()).ok());
  }
  // The dead first member again, then the live one.
  auto got = (*store)->Get("k", absl::ZeroDuration());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
}

TEST(EtcdStoreNoServerTest, UnreachableClusterNamesItsEndpoints) {
  auto o =
      ParseEtcdOptions("127.0.0.1:1,127.0.0.1:2", "read_timeout=0.5", "job");
  ASSERT_TRUE(o.ok());
  auto store = EtcdStore::Connect(*o);
  ASSERT_TRUE(store.ok());
  auto s = (*store)->Set("k", "v");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("127.0.0.1:1,127.0.0.1:2"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace distjob
