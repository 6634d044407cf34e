#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/loopback_testing.h"
#include "common/thread_state_testing.h"
#include "gtest/gtest.h"
#include "rendezvous/store/grpc_store_client.h"
#include "rendezvous/store/server/store_server.h"

namespace distjob {
namespace {

// Where a store started on 127.0.0.1 listens.
std::string Loopback(const StoreServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

TEST(GrpcStoreTest, RoundTripsEveryOperation) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
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
    auto other = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
    ASSERT_TRUE(other->Set("late", "v").ok());
  });
  EXPECT_EQ(*client->Get("late", absl::Seconds(10)), "v");
  setter.join();
  auto w = client->Watch("", listing->revision, absl::Seconds(5));
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->first);
}

// A page holds up to max_list_bytes (4 MiB) of keys and values, plus each
// entry's framing: the answer is larger than gRPC's default 4 MiB cap on
// what a client receives, which refused it (RESOURCE_EXHAUSTED).
TEST(GrpcStoreTest, AFullPageReachesTheClient) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  const std::string value(4090, 'v');
  for (int batch = 0; batch < 8; ++batch) {
    std::vector<std::pair<std::string, std::string>> kvs;
    for (int i = 0; i < 128; ++i) {
      kvs.emplace_back(absl::StrCat("p/", batch * 128 + i + 1000), value);
    }
    ASSERT_TRUE(client->MultiSet(kvs, absl::ZeroDuration()).ok());
  }
  auto page = client->ListPage("p/", "", 0);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->entries.size(), 1024u);
}

TEST(GrpcStoreTest, WatchAnyCarriesItsPrefixesAndTheChange) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  auto rev = client->Set("other/x", "1");
  ASSERT_TRUE(rev.ok());
  // Nothing under either prefix yet.
  auto quiet = client->WatchAny({"a/", "b/"}, *rev, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->changed);
  // Runs `write` once the watch is parked: a change before it would be
  // answered at once from the past, without saying what changed.
  auto once_parked = [&](std::function<void()> write) {
    return std::thread([&server, write] {
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while ((*server)->core()->Stats().parked_waits == 0 &&
             absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(1));
      }
      write();
    });
  };
  std::thread setter = once_parked([&] {
    auto other = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
    ASSERT_TRUE(other->Set("b/k", "v").ok());
  });
  // The second prefix's write answers it, and says what it was.
  auto w = client->WatchAny({"a/", "b/"}, *rev, absl::Seconds(30));
  setter.join();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->changed);
  ASSERT_TRUE(w->change.has_value());
  EXPECT_EQ(w->change->key, "b/k");
  EXPECT_EQ(w->change->value, "v");
  EXPECT_EQ(w->change->revision, w->revision);
  std::thread deleter = once_parked([&] {
    auto other = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
    ASSERT_TRUE(other->Delete({"b/k"}).ok());
  });
  auto gone = client->WatchAny({"a/", "b/"}, w->revision, absl::Seconds(30));
  deleter.join();
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_TRUE(gone->change.has_value());
  EXPECT_EQ(gone->change->key, "b/k");
  EXPECT_FALSE(gone->change->value.has_value());
}

TEST(GrpcStoreTest, WatchOfTooManyPrefixesIsRefusedNamingTheLimit) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  std::vector<std::string> prefixes;
  for (int i = 0; i < 9; ++i) prefixes.push_back("p" + std::to_string(i));
  auto w = client->WatchAny(prefixes, 0, absl::Seconds(30));
  EXPECT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
  EXPECT_NE(w.status().message().find("at most 8 (max_watch_prefixes)"),
            absl::string_view::npos)
      << w.status();
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
  const std::string endpoint = Loopback(**server);
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
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
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

// A joiner's add and record travel as one Add request.
TEST(GrpcStoreTest, AddThenRecordIsOneRequest) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  ASSERT_TRUE(client->Set("joined", "4").ok());
  auto r = client->AddThenRecord("joined", 1, "join/", "me");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->count, 5);
  EXPECT_TRUE(r->recorded);
  EXPECT_EQ(*client->Get("join/5", absl::ZeroDuration()), "me");
  const StoreStats stats = (*server)->Stats();
  int64_t adds = 0, sets = 0;
  for (const StoreRequestCount& r : stats.requests) {
    if (r.method == "Add") adds += r.count;
    if (r.method == "Set") sets += r.count;
  }
  EXPECT_EQ(adds, 1);
  EXPECT_EQ(sets, 1);  // the first Set above only
}

// A new joiner's lease, add and record travel as one Add request; the
// lease keys get the TTL, the counter and the record none.
TEST(GrpcStoreTest, LeaseThenAddRecordIsOneRequest) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  auto r = client->LeaseThenAddRecord({{"alive/me", "1"}}, absl::Seconds(30),
                                      "joined", 1, "join/", "me");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->count, 1);
  EXPECT_TRUE(r->recorded);
  auto listing = client->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  std::map<std::string, absl::Duration> ttl;
  for (const StoreEntry& e : listing->entries) ttl[e.key] = e.ttl_left;
  ASSERT_EQ(ttl.size(), 3u);
  EXPECT_GT(ttl["alive/me"], absl::Seconds(20));
  EXPECT_LE(ttl["alive/me"], absl::Seconds(30));
  EXPECT_EQ(ttl["joined"], absl::ZeroDuration());
  EXPECT_EQ(ttl["join/1"], absl::ZeroDuration());
  int64_t adds = 0, others = 0;
  for (const StoreRequestCount& c : (*server)->Stats().requests) {
    (c.method == "Add" ? adds : others) += c.count;
  }
  EXPECT_EQ(adds, 1);
  EXPECT_EQ(others, 2);  // WaitUntilReachable's NumKeys and the List
}

// A new node's lease, add, record and read of the round travel as one Add
// request; the listing is the store after the add, at its revision.
TEST(GrpcStoreTest, AddRecordThenListIsOneRequest) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  ASSERT_TRUE(client->Set("ctl/state", "round 0").ok());
  auto r = client->AddRecordThenList({{"ctl/alive/me", "1"}}, absl::Seconds(30),
                                     "joined", 1, "join/", "me", "ctl/");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->add.count, 1);
  EXPECT_TRUE(r->add.recorded);
  EXPECT_TRUE(r->add.leased);
  ASSERT_TRUE(r->listing.ok()) << r->listing.status();
  // The lease written with the add is in it: it was read after.
  std::map<std::string, std::string> listed;
  for (const StoreEntry& e : r->listing->entries) listed[e.key] = e.value;
  EXPECT_EQ(listed, (std::map<std::string, std::string>{
                        {"ctl/alive/me", "1"}, {"ctl/state", "round 0"}}));
  auto after = client->List("");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(r->listing->revision, after->revision);
  int64_t adds = 0, lists = 0;
  for (const StoreRequestCount& c : (*server)->Stats().requests) {
    if (c.method == "Add") adds += c.count;
    if (c.method == "List") lists += c.count;
  }
  EXPECT_EQ(adds, 1);
  EXPECT_EQ(lists, 1);  // the List above only
}

// A listing the store refuses after the add (its prefix over the key
// limit): the add stands and is answered once; the read's refusal comes
// with it, from the client's own List.
TEST(GrpcStoreTest, ARefusedListingAfterTheAddLeavesTheAdd) {
  StoreLimits limits;
  limits.max_key_bytes = 16;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  auto r = client->AddRecordThenList({}, absl::ZeroDuration(), "joined", 1,
                                     "join/", "me", std::string(32, 'p'));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->add.count, 1);
  EXPECT_TRUE(r->add.recorded);
  EXPECT_TRUE(absl::IsInvalidArgument(r->listing.status()))
      << r->listing.status();
  EXPECT_EQ(*client->Get("joined", absl::ZeroDuration()), "1");
}

// A lease the store refuses (a key over its limit) adds nothing.
TEST(GrpcStoreTest, ARefusedLeaseAddsNothing) {
  StoreLimits limits;
  limits.max_key_bytes = 16;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  auto r =
      client->LeaseThenAddRecord({{std::string(32, 'k'), "1"}},
                                 absl::Seconds(30), "joined", 1, "join/", "me");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
      << r.status();
  EXPECT_EQ(client->NumKeys().value(), 0);
}

// Without busy_poll a call finds the store's queue thread asleep and wakes
// it; within busy_poll of its last event, the next call finds it awake.
TEST(GrpcStoreTest, TheQueueThreadStaysAwakeForBusyPollAfterACall) {
  auto queue_thread = [] { return ThreadState("store-cq"); };
  StoreLimits limits;
  limits.busy_poll = absl::ZeroDuration();
  {
    auto server = StoreServer::Start("127.0.0.1", 0, limits);
    ASSERT_TRUE(server.ok()) << server.status();
    auto client =
        GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
    ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(WaitFor([&] { return queue_thread() == 'S'; }));
      const int64_t before = (*server)->Sleeps();
      ASSERT_TRUE(client->Add("n", 1).ok());
      EXPECT_GT((*server)->Sleeps(), before);
    }
  }
  limits.busy_poll = absl::Seconds(2);
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->WaitUntilReachable(absl::Seconds(5)).ok());
  ASSERT_TRUE(client->Add("n", 1).ok());
  const int64_t awake = (*server)->Sleeps();
  for (int i = 0; i < 10; ++i) {
    // Given time to fall asleep between calls, it stays awake.
    EXPECT_FALSE(
        WaitFor([&] { return queue_thread() == 'S'; }, absl::Milliseconds(20)));
    ASSERT_TRUE(client->Add("n", 1).ok());
  }
  EXPECT_EQ((*server)->Sleeps(), awake);
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
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  auto s = client->Set("k", std::string(100, 'x'));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

// Polls the server's count of parked waits until it is `n` or 10 s pass.
bool AwaitParked(StoreServer* server, int64_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server->Stats().parked_waits != n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// A client that goes away used to leave its get or watch parked until its
// deadline (an hour, or none), holding memory and a slot of max_waiters.
TEST(GrpcStoreTest, AWaitIsFreedWhenItsCallIsCancelled) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string endpoint = Loopback(**server);
  for (int i = 0; i < 20; ++i) {
    auto client = GrpcStoreClient::Connect(endpoint, absl::Seconds(5));
    std::thread waiter([&] {
      if (i % 2 == 0) {
        (void)client->Get("never", absl::Seconds(600));
      } else {
        (void)client->Watch("never/", 0, absl::Seconds(600));
      }
    });
    ASSERT_TRUE(AwaitParked(server->get(), 1)) << "call " << i;
    client->Close();
    waiter.join();
    ASSERT_TRUE(AwaitParked(server->get(), 0)) << "call " << i;
  }
  auto client = GrpcStoreClient::Connect(endpoint, absl::Seconds(5));
  std::thread setter([&] {
    ASSERT_TRUE(AwaitParked(server->get(), 1));
    ASSERT_TRUE(client->Set("late", "v").ok());
  });
  EXPECT_EQ(*client->Get("late", absl::Seconds(10)), "v");
  setter.join();
}

// The store answers from its own completion-queue thread. gRPC 1.51's
// callback API would add two "nexting" threads that hand the poller role
// to each other on every request, which tripled the server's context
// switches per call (docs/bench/store-profile.md).
TEST(GrpcStoreTest, ServesWithoutTheCallbackApisHandOffThreads) {
  auto server = StoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  ASSERT_TRUE(client->Set("a", "1").ok());
  EXPECT_EQ(*client->Get("a", absl::Seconds(5)), "1");
  int threads = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    EXPECT_NE(name, "nexting_thread");
    ++threads;
  }
  EXPECT_GT(threads, 1);
}

TEST(GrpcStoreTest, OnePeerParksAtMostItsShare) {
  StoreLimits limits;
  limits.max_waiters_per_peer = 2;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string endpoint = Loopback(**server);
  auto first = GrpcStoreClient::Connect(endpoint, absl::Seconds(5));
  auto second = GrpcStoreClient::Connect(endpoint, absl::Seconds(5));
  std::thread a([&] { (void)first->Get("k", absl::Seconds(600)); });
  std::thread b([&] { (void)second->Watch("k", 0, absl::Seconds(600)); });
  ASSERT_TRUE(AwaitParked(server->get(), 2));
  auto third = GrpcStoreClient::Connect(endpoint, absl::Seconds(5));
  auto refused = third->Get("k", absl::Seconds(600));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_waiters_per_peer"),
            std::string::npos)
      << refused.status();
  // Calls that do not block are not counted.
  EXPECT_TRUE(third->Set("other", "v").ok());
  // The slot comes back once the server has seen the cancellation: a
  // short wait is then admitted and times out instead of being refused.
  first->Close();
  a.join();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Status admitted;
  do {
    admitted = third->Get("k", absl::Milliseconds(20)).status();
  } while (absl::IsResourceExhausted(admitted) && absl::Now() < deadline);
  EXPECT_EQ(admitted.code(), absl::StatusCode::kDeadlineExceeded) << admitted;
  ASSERT_TRUE(third->Set("k", "v").ok());
  b.join();
}

// Which of the server's queues served `client`'s next call: gRPC assigns
// each connection to one queue.
int QueueOf(StoreServer* server, GrpcStoreClient* client) {
  const std::vector<int64_t> before = server->QueueCalls();
  if (!client->NumKeys().ok()) return -1;
  const std::vector<int64_t> after = server->QueueCalls();
  for (size_t q = 0; q < after.size(); ++q) {
    if (after[q] != before[q]) return static_cast<int>(q);
  }
  return -1;
}

// A large job's store serves its connections from several completion
// queues, each with its own thread; a wait parked by a call of one queue
// is answered when a set arrives on another.
TEST(GrpcStoreTest, AWaitOnOneQueueIsWokenByASetOnAnother) {
  StoreLimits limits;
  limits.completion_queues = 4;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ((*server)->QueueCalls().size(), 4u);
  const std::string endpoint = Loopback(**server);
  auto waiter = GrpcStoreClient::Connect(endpoint, absl::Seconds(5), {},
                                         /*own_connection=*/true);
  const int waiting_queue = QueueOf(server->get(), waiter.get());
  ASSERT_GE(waiting_queue, 0);
  // Connections land on queues at random: open more until one is served
  // by another queue than the waiter's (64 all on one: 4^-63).
  std::vector<std::unique_ptr<GrpcStoreClient>> setters;
  int setting_queue = waiting_queue;
  while (setting_queue == waiting_queue && setters.size() < 64) {
    setters.push_back(GrpcStoreClient::Connect(endpoint, absl::Seconds(5), {},
                                               /*own_connection=*/true));
    setting_queue = QueueOf(server->get(), setters.back().get());
    ASSERT_GE(setting_queue, 0);
  }
  ASSERT_NE(setting_queue, waiting_queue);
  EXPECT_EQ((*server)->Stats().connections,
            static_cast<int64_t>(setters.size() + 1));
  std::thread setter([&] {
    ASSERT_TRUE(AwaitParked(server->get(), 1));
    ASSERT_TRUE(setters.back()->Set("late", "v").ok());
  });
  EXPECT_EQ(*waiter->Get("late", absl::Seconds(30)), "v");
  setter.join();
}

TEST(GrpcStoreTest, ListingsArePagedOverTheWire) {
  StoreLimits limits;
  limits.max_list_entries = 2;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
  for (const char* k : {"p/a", "p/b", "p/c", "p/d", "p/e"}) {
    ASSERT_TRUE(client->Set(k, "v").ok());
  }
  auto page = client->ListPage("p/", "p/a", 100);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].key, "p/b");
  EXPECT_TRUE(page->more);
  auto all = client->List("p/");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->entries.size(), 5u);
}

TEST(GrpcStoreTest, RefusedStoreFailsAsRefusedNamingTheAddress) {
  auto client =
      GrpcStoreClient::Connect("127.0.0.1:1", absl::Milliseconds(300));
  auto s = client->Set("k", "v");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_NE(s.status().message().find("connection refused by 127.0.0.1:1"),
            absl::string_view::npos)
      << s.status();
}

TEST(GrpcStoreTest, ConnectFailureNamesTheRefusingAddress) {
  EXPECT_EQ(ConnectFailure("failed to connect to all addresses; last error: "
                           "UNKNOWN: ipv4:10.0.0.1:29400: Failed to connect "
                           "to remote host: Connection refused",
                           "10.0.0.9:1"),
            "connection refused by 10.0.0.1:29400");
  EXPECT_EQ(ConnectFailure("last error: UNKNOWN: ipv6:[::1]:29400: Failed to "
                           "connect to remote host: Connection refused",
                           "x"),
            "connection refused by [::1]:29400");
  EXPECT_EQ(ConnectFailure("Connection refused", "10.0.0.1:5"),
            "connection refused by 10.0.0.1:5");
  EXPECT_EQ(ConnectFailure("No route to host", "10.0.0.1:5"),
            "cannot connect to 10.0.0.1:5 (No route to host)");
  EXPECT_EQ(TargetAddresses("ipv4:10.0.0.1:1,10.0.0.2:1"),
            "10.0.0.1:1, 10.0.0.2:1");
  EXPECT_EQ(TargetAddresses("ipv6:[::1]:1"), "[::1]:1");
}

// A loopback port nothing answers on: `listening`, connections are
// accepted by the kernel and never answered (a host that hangs); else the
// port is only bound, and connections are refused (a host not up yet).
class DeadPort {
 public:
  explicit DeadPort(bool listening) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)),
              0);
    if (listening) {
      EXPECT_EQ(listen(fd_, 16), 0);
    }
    socklen_t size = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
  }
  ~DeadPort() { close(fd_); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_;
};

// A refused store is said at once, whatever the call's timeout (a join's
// is join_timeout), so the join retries and logs why.
TEST(GrpcStoreTest, RefusedFirstContactFailsWithinSeconds) {
  DeadPort refused(/*listening=*/false);
  auto client = GrpcStoreClient::Connect(refused.endpoint(), absl::Seconds(30));
  const absl::Time start = absl::Now();
  auto s = client->Set("k", "v");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_NE(
      s.status().message().find("connection refused by " + refused.endpoint()),
      absl::string_view::npos)
      << s.status();
  // A host that accepts and never answers is not said to refuse.
  DeadPort silent(/*listening=*/true);
  auto waiting =
      GrpcStoreClient::Connect(silent.endpoint(), absl::Milliseconds(1500));
  const absl::Status hung = waiting->Set("k", "v").status();
  EXPECT_FALSE(hung.ok());
  EXPECT_EQ(hung.message().find("refused"), absl::string_view::npos) << hung;
}

// Connect runs on the thread that reads the stop signals, where no Close
// can reach it, so it must not wait for the connection; a call waiting for
// the first connection (retried quickly for a second) ends at Close.
TEST(GrpcStoreTest, CloseEndsTheWaitForTheFirstConnection) {
  for (const bool listening : {true, false}) {
    SCOPED_TRACE(listening ? "a host that never answers" : "a refused port");
    DeadPort dead(listening);
    const absl::Time start = absl::Now();
    auto client = GrpcStoreClient::Connect(dead.endpoint(), absl::Seconds(30));
    absl::Notification calling;
    absl::Status status;
    absl::Time returned;
    std::thread caller([&] {
      calling.Notify();
      status = client->Set("k", "v").status();
      returned = absl::Now();
    });
    calling.WaitForNotification();
    const absl::Time closing = absl::Now();
    client->Close();
    caller.join();
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
    EXPECT_LT(returned - closing, absl::Milliseconds(300));
    // The fast-connect window is a second, and Connect used to spend it
    // all (>= 1 s here) before a call could be closed.
    EXPECT_LT(returned - start, absl::Milliseconds(900));
  }
}

// A raw HTTP/2 client: the preface and an empty SETTINGS, then nothing.
int OpenHttp2(int port) {
  const int fd = ConnectLoopback(port);
  const std::string hello = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                            std::string("\0\0\0\x04\0\0\0\0\0", 9);
  EXPECT_EQ(send(fd, hello.data(), hello.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(hello.size()));
  return fd;
}

TEST(GrpcStoreTest, ConnectionsAreCappedAndCountedUntilTheyClose) {
  ConnLimits conns;
  conns.max_conns_per_peer = 3;
  auto server = StoreServer::Start("127.0.0.1", 0, {}, {}, conns);
  ASSERT_TRUE(server.ok()) << server.status();
  {
    auto client =
        GrpcStoreClient::Connect(Loopback(**server), absl::Seconds(5));
    ASSERT_TRUE(client->Set("a", "1").ok());
    EXPECT_EQ((*server)->Stats().connections, 1);
  }
  ASSERT_TRUE(WaitFor([&] { return (*server)->Stats().connections == 0; }));
  std::vector<int> raw;
  for (int i = 0; i < 5; ++i) raw.push_back(OpenHttp2((*server)->port()));
  ASSERT_TRUE(WaitFor([&] {
    return (*server)->Stats().connections_refused == 2;
  })) << (*server)->Stats().connections_refused;
  EXPECT_EQ((*server)->Stats().connections, 3);
  for (int fd : raw) close(fd);
  EXPECT_TRUE(WaitFor([&] { return (*server)->Stats().connections == 0; }))
      << (*server)->Stats().connections;
}

// gRPC ends an idle connection with shutdown(2) and close; the count
// follows though the client keeps its end open.
TEST(GrpcStoreTest, ConnectionsGrpcClosesAreNoLongerCounted) {
  ConnLimits conns;
  conns.idle_timeout = absl::Milliseconds(300);
  auto server = StoreServer::Start("127.0.0.1", 0, {}, {}, conns);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = OpenHttp2((*server)->port());
  ASSERT_TRUE(WaitFor([&] { return (*server)->Stats().connections == 1; }));
  EXPECT_TRUE(WaitFor([&] { return (*server)->Stats().connections == 0; }))
      << (*server)->Stats().connections;
  close(fd);
}

}  // namespace
}  // namespace distjob
