#include "rendezvous/store/etcd_store.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "proto/etcd_rpc.grpc.pb.h"

namespace distjob {
namespace {

// A free loopback port: the project's own helper, asserted here.
int FreePort() {
  auto port = FindFreePort("127.0.0.1");
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : 0;
}

// Whether `cond` holds within `within` (polled every 5 ms).
bool WaitFor(const std::function<bool()>& cond, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return cond();
}

// A flaky transport between a store and etcd (EtcdStoreOptions::test_hooks):
// answers lost after etcd committed them, lease grants held until released.
struct Faults {
  absl::Mutex mu;
  // The next `lose` transactions that write a counter's sequence (ctr/)
  // commit, and their caller sees DEADLINE_EXCEEDED instead of the answer.
  int lose ABSL_GUARDED_BY(mu) = 0;
  int lost ABSL_GUARDED_BY(mu) = 0;
  // What those transactions sent, to be delivered again late.
  std::vector<etcdserverpb::TxnRequest> lost_txns ABSL_GUARDED_BY(mu);
  // Lease grants wait until released, then fail with PERMISSION_DENIED.
  bool hold_grants ABSL_GUARDED_BY(mu) = false;
  bool released ABSL_GUARDED_BY(mu) = false;
  int held ABSL_GUARDED_BY(mu) = 0;
  // Calls that started waiting for another call's job-lease adoption.
  int lease_waits ABSL_GUARDED_BY(mu) = 0;
  // Keep-alive answers for lease `hold_lease` (0: none) wait for a permit
  // each; renewals of it sent, and its answers that arrived.
  int64_t hold_lease ABSL_GUARDED_BY(mu) = 0;
  int permits ABSL_GUARDED_BY(mu) = 0;
  int renewals_sent ABSL_GUARDED_BY(mu) = 0;
  int answers_arrived ABSL_GUARDED_BY(mu) = 0;

  // Waits (at most 20 s) until `pred` holds.
  bool AwaitFor(bool (*pred)(Faults*)) {
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(pred, this), absl::Seconds(20));
  }
};

class FaultInterceptor : public grpc::experimental::Interceptor {
 public:
  FaultInterceptor(Faults* faults, std::string method)
      : faults_(faults), method_(std::move(method)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    if (m->QueryInterceptionHookPoint(Hook::PRE_SEND_MESSAGE) &&
        method_ == "/etcdserverpb.KV/Txn") {
      const auto* req =
          static_cast<const etcdserverpb::TxnRequest*>(m->GetSendMessage());
      bool writes_counter = false;
      for (const auto& op : req->success()) {
        writes_counter =
            writes_counter ||
            (op.has_request_put() &&
             op.request_put().key().find("/ctr/") != std::string::npos);
      }
      absl::MutexLock lock(&faults_->mu);
      if (writes_counter && faults_->lose > 0) {
        --faults_->lose;
        ++faults_->lost;
        faults_->lost_txns.push_back(*req);
        fail_ = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                             "injected: answer lost after the commit");
      }
    }
    if (m->QueryInterceptionHookPoint(Hook::PRE_SEND_INITIAL_METADATA) &&
        method_ == "/etcdserverpb.Lease/LeaseGrant") {
      absl::MutexLock lock(&faults_->mu);
      if (faults_->hold_grants) {
        ++faults_->held;
        faults_->mu.Await(absl::Condition(&faults_->released));
        fail_ = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                             "injected: grant refused");
      }
    }
    if (method_ == "/etcdserverpb.Lease/LeaseKeepAlive") HoldKeepAlive(m);
    if (m->QueryInterceptionHookPoint(Hook::POST_RECV_STATUS) && !fail_.ok()) {
      *m->GetRecvStatus() = fail_;
    }
    m->Proceed();
  }

 private:
  static bool AnswerMayPass(Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu) {
    return f->hold_lease == 0 || f->permits > 0;
  }
  void HoldKeepAlive(grpc::experimental::InterceptorBatchMethods* m) {
    using Hook = grpc::experimental::InterceptionHookPoints;
    absl::MutexLock lock(&faults_->mu);
    if (faults_->hold_lease == 0) return;
    if (m->QueryInterceptionHookPoint(Hook::PRE_SEND_MESSAGE)) {
      const auto* req = static_cast<const etcdserverpb::LeaseKeepAliveRequest*>(
          m->GetSendMessage());
      if (req->id() == faults_->hold_lease) ++faults_->renewals_sent;
    }
    if (m->QueryInterceptionHookPoint(Hook::POST_RECV_MESSAGE)) {
      const auto* resp =
          static_cast<const etcdserverpb::LeaseKeepAliveResponse*>(
              m->GetRecvMessage());
      if (resp == nullptr || resp->id() != faults_->hold_lease) return;
      ++faults_->answers_arrived;
      faults_->mu.Await(absl::Condition(&AnswerMayPass, faults_));
      if (faults_->hold_lease != 0) --faults_->permits;
    }
  }

  Faults* const faults_;
  const std::string method_;
  grpc::Status fail_;
};

class FaultFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit FaultFactory(Faults* faults) : faults_(faults) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new FaultInterceptor(faults_, info->method());
  }

 private:
  Faults* const faults_;
};

// One real etcd member on loopback with a throw-away data dir, killed when
// the test ends.
class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A port taken free can be taken again before etcd binds it (as the
    // source port of another test's connection): etcd then exits at once,
    // and a fresh pair of ports is tried.
    for (int attempt = 1;; ++attempt) {
      bool exited = false;
      ASSERT_NO_FATAL_FAILURE(Start(&exited));
      if (!exited) return;
      ASSERT_LT(attempt, 5) << "etcd exited at start 5 times";
    }
  }
  void Start(bool* exited) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/etcd-XXXXXX");
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    const int client = FreePort(), peer = FreePort();
    client_port_ = client;
    endpoint_ = absl::StrCat("127.0.0.1:", client);
    peer_url_ = absl::StrCat("http://127.0.0.1:", peer);
    ASSERT_NO_FATAL_FAILURE(Launch(exited));
  }
  // Starts etcd on the ports and data dir chosen, and waits until it
  // serves (`exited`: it exited instead).
  void Launch(bool* exited) {
    const std::string curl = absl::StrCat("http://", endpoint_);
    const std::string log_path = dir_ + ".log";
    const std::string cluster = "t=" + peer_url_;
    // Built before fork: the child of a process with live gRPC threads may
    // only make async-signal-safe calls (an allocation there can deadlock on
    // a lock another thread held, leaving a child that never execs etcd).
    const char* const argv[] = {"etcd",
                                "--name",
                                "t",
                                "--data-dir",
                                dir_.c_str(),
                                "--listen-client-urls",
                                curl.c_str(),
                                "--advertise-client-urls",
                                curl.c_str(),
                                "--listen-peer-urls",
                                peer_url_.c_str(),
                                "--initial-advertise-peer-urls",
                                peer_url_.c_str(),
                                "--initial-cluster",
                                cluster.c_str(),
                                nullptr};
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      // etcd logs a lot; keep it beside the data dir for post-mortems.
      const int log =
          open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(log, 1);
      dup2(log, 2);
      execv("/usr/bin/etcd", const_cast<char* const*>(argv));
      _exit(127);
    }
    // One client from before etcd listens: it must get through once
    // etcd serves, however its first connections went.
    auto probe = Open("probe");
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::Status ready;
    do {
      ready = probe->WaitUntilReachable(absl::Seconds(1));
      if (!ready.ok() && waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        *exited = true;
        return;
      }
    } while (!ready.ok() && absl::Now() < deadline);
    ASSERT_TRUE(ready.ok()) << ready << "\netcd's log ends:\n"
                            << LogTail(log_path);
  }
  // The last lines of etcd's log, for a failure message.
  static std::string LogTail(const std::string& path) {
    std::ifstream in(path);
    std::deque<std::string> lines;
    for (std::string line; std::getline(in, line);) {
      lines.push_back(line);
      if (lines.size() > 20) lines.pop_front();
    }
    return lines.empty() ? "(empty or unreadable: " + path + ")"
                         : absl::StrJoin(lines, "\n");
  }
  // Kills etcd and starts it again on the same ports and data.
  void Restart() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    bool exited = false;
    ASSERT_NO_FATAL_FAILURE(Launch(&exited));
    ASSERT_FALSE(exited) << "etcd did not start again on " << endpoint_;
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // etcd's own count of its open watchers, from the /metrics page it serves
  // on the client URL; -1 when it cannot be read.
  int64_t Watchers() const {
    return Metric("etcd_debugging_mvcc_watcher_total");
  }
  // The requests of `method` (Range, Txn; LeaseGrant of service Lease)
  // etcd answered.
  int64_t Requests(const std::string& method,
                   const std::string& service = "KV") const {
    return Metric(absl::StrCat(
        "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"", method,
        "\",grpc_service=\"etcdserverpb.", service, "\",grpc_type=\"unary\"}"));
  }
  // The value of the metric line that starts with `name`, -1 if none.
  int64_t Metric(const std::string& name_and_labels) const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(client_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string page;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
      if (write(fd, request.data(), request.size()) ==
          static_cast<ssize_t>(request.size())) {
        char buf[65536];
        for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) {
          page.append(buf, static_cast<size_t>(n));
        }
      }
    }
    close(fd);
    const std::string name = "\n" + name_and_labels + " ";
    const size_t at = page.find(name);
    int64_t count = -1;
    if (at == std::string::npos ||
        !absl::SimpleAtoi(
            page.substr(at + name.size(),
                        page.find('\n', at + 1) - at - name.size()),
            &count)) {
      return -1;
    }
    return count;
  }
  // Waits (at most 20 s) until etcd holds more than `before` watchers: a
  // blocking call of the store under test is then parked on the server.
  void AwaitWatcherAbove(int64_t before) const {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (Watchers() <= before && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_GT(Watchers(), before) << "no watch reached etcd";
  }
  std::unique_ptr<EtcdStore> Open(
      const std::string& run_id, const std::string& conf = "",
      Faults* faults = nullptr,
      absl::Duration rpc_timeout = absl::Seconds(10)) {
    auto o = ParseEtcdOptions(endpoint_, conf, run_id);
    EXPECT_TRUE(o.ok()) << o.status();
    o->rpc_timeout = rpc_timeout;
    if (faults != nullptr) {
      o->test_hooks.interceptors = [faults] {
        std::vector<std::unique_ptr<
            grpc::experimental::ClientInterceptorFactoryInterface>>
            v;
        v.push_back(std::make_unique<FaultFactory>(faults));
        return v;
      };
      o->test_hooks.lease_wait = [faults] {
        absl::MutexLock lock(&faults->mu);
        ++faults->lease_waits;
      };
    }
    auto s = EtcdStore::Connect(*o);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  // etcd's own KV service, past the store under test.
  std::unique_ptr<etcdserverpb::KV::Stub> RawKv() const {
    return etcdserverpb::KV::NewStub(
        grpc::CreateChannel(endpoint_, grpc::InsecureChannelCredentials()));
  }
  // An adder of one that dies between its two writes: the counter's
  // sequence counts the add, its value is never written.
  void AddOnlyToTheSequence(const std::string& run_id, const std::string& key) {
    etcdserverpb::PutRequest put;
    put.set_key(absl::StrCat("/distjob/", run_id, "/ctr/", key));
    put.set_ignore_value(true);
    etcdserverpb::PutResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    auto s = RawKv()->Put(&ctx, put, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // The lease `key` is attached to (0: none, or no such key).
  int64_t RawLease(const std::string& key) const {
    etcdserverpb::RangeRequest req;
    req.set_key(key);
    etcdserverpb::RangeResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (!RawKv()->Range(&ctx, req, &resp).ok() || resp.kvs_size() != 1) {
      return 0;
    }
    return resp.kvs(0).lease();
  }
  // Keys etcd holds under `prefix` (the store's own, past its namespace).
  int64_t RawCount(const std::string& prefix) const {
    etcdserverpb::RangeRequest req;
    req.set_key(prefix);
    std::string end = prefix;
    end.back() = static_cast<char>(end.back() + 1);
    req.set_range_end(end);
    req.set_count_only(true);
    etcdserverpb::RangeResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (!RawKv()->Range(&ctx, req, &resp).ok()) return -1;
    return resp.count();
  }
  int client_port_ = 0;
  pid_t pid_ = -1;
  std::string endpoint_, peer_url_, dir_;
};

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

// N nodes joining a round add to one counter at once: each add is one
// write (and one write of the value), never a read and compare-and-swap
// that all but one of the racing writers lose and retry (O(N²) requests).
TEST_F(EtcdStoreTest, ConcurrentAddsOfOneTakeTwoWritesEachWithoutRetries) {
  constexpr int kClients = 4, kPerClient = 16, kAdds = kClients * kPerClient;
  std::vector<std::unique_ptr<EtcdStore>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Open("job"));
    // Each client's job lease first: not counted below.
    ASSERT_TRUE(clients.back()->Set(absl::StrCat("c", i), "x").ok());
  }
  // The counter exists (as after the round's first join).
  ASSERT_EQ(*clients[0]->Add("joined", 0), 0);
  const int64_t txns = Requests("Txn"), ranges = Requests("Range");
  ASSERT_GE(txns, 0);
  std::vector<int64_t> got(kAdds, -1);
  {
    absl::Mutex mu;
    int arrived = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kAdds; ++t) {
      threads.emplace_back([&, t] {
        {
          // All at once, as a round's nodes do.
          absl::MutexLock lock(&mu);
          ++arrived;
          mu.Await(absl::Condition(
              +[](int* n) { return *n == kAdds; }, &arrived));
        }
        auto r = clients[t % kClients]->Add("joined", 1);
        got[t] = r.ok() ? *r : -1;
      });
    }
    for (auto& t : threads) t.join();
  }
  std::sort(got.begin(), got.end());
  for (int i = 0; i < kAdds; ++i) ASSERT_EQ(got[i], i + 1);
  EXPECT_EQ(Requests("Txn") - txns, 2 * kAdds);
  EXPECT_EQ(Requests("Range") - ranges, 0);
  // Every add's result is readable once it returned.
  EXPECT_EQ(*clients[1]->Get("joined", absl::ZeroDuration()),
            absl::StrCat(kAdds));
  EXPECT_EQ(*clients[2]->Add("joined", 0), kAdds);
  // Other deltas, and writes that are not adds, keep TCPStore's counter.
  EXPECT_EQ(*clients[0]->Add("joined", -10), kAdds - 10);
  EXPECT_EQ(*clients[1]->Add("joined", 1), kAdds - 9);
  ASSERT_TRUE(clients[0]->Set("joined", "100").ok());
  EXPECT_EQ(*clients[1]->Add("joined", 1), 101);
  EXPECT_EQ(*clients[1]->Add("joined", 1), 102);
  EXPECT_EQ(*clients[0]->Get("joined", absl::ZeroDuration()), "102");
  EXPECT_EQ(*clients[0]->Delete({"joined"}), 1);
  EXPECT_EQ(*clients[2]->Add("joined", 1), 1);
  EXPECT_EQ(*clients[2]->Add("joined", 1), 2);
  ASSERT_TRUE(clients[3]->CompareSet("joined", "2", "7")->swapped);
  EXPECT_EQ(*clients[3]->Add("joined", 1), 8);
  EXPECT_EQ(*clients[3]->Append("joined", "0"), 2);
  EXPECT_EQ(*clients[0]->Add("joined", 1), 81);
  // The counters' own records are no keys of the store.
  EXPECT_EQ(*clients[0]->NumKeys(), kClients + 1);
}

// Many threads' first calls on one client adopt one job lease between
// them: one grant for the job and one for this client's holder record.
TEST_F(EtcdStoreTest, ConcurrentFirstCallsOfAClientGrantOneJobLease) {
  auto store = Open("job");
  const int64_t grants = Requests("LeaseGrant", "Lease");
  ASSERT_GE(grants, 0);
  constexpr int kThreads = 32;
  absl::Mutex mu;
  int arrived = 0;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      {
        absl::MutexLock lock(&mu);
        ++arrived;
        mu.Await(absl::Condition(
            +[](int* n) { return *n == kThreads; }, &arrived));
      }
      if (store->Set(absl::StrCat("k", t), "v").ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads);
  EXPECT_EQ(Requests("LeaseGrant", "Lease") - grants, 2);
  EXPECT_EQ(*store->NumKeys(), kThreads);
}

// A counter's value write lags its add, and is lost with an adder that
// dies between its two writes: every read takes the count from the
// counter's sequence.
TEST_F(EtcdStoreTest, CounterReadsAreExactWhenAnAdderDiedBetweenItsWrites) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("other", "x").ok());
  ASSERT_EQ(*store->Add("joined", 1), 1);
  ASSERT_EQ(*store->Add("joined", 1), 2);
  AddOnlyToTheSequence("job", "joined");
  AddOnlyToTheSequence("job", "joined");
  EXPECT_EQ(*store->Get("joined", absl::ZeroDuration()), "4");
  auto values = store->MultiGet({"other", "joined"}, absl::ZeroDuration());
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"x", "4"}));
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->entries.size(), 2u);
  EXPECT_EQ(listing->entries[0].key, "joined");
  EXPECT_EQ(listing->entries[0].value, "4");
  auto page = store->ListPage("", "", 1);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].value, "4");
  // Compare-set compares with the exact count.
  auto r = store->CompareSet("joined", "2", "stale");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "4");
  r = store->CompareSet("joined", "", "absent");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->swapped);
  EXPECT_EQ(r->value, "4");
  r = store->CompareSet("joined", "4", "10");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->swapped);
  EXPECT_EQ(*store->Get("joined", absl::ZeroDuration()), "10");
  EXPECT_EQ(*store->Add("joined", 1), 11);
  // Append appends to the exact count.
  ASSERT_EQ(*store->Add("c", 1), 1);
  ASSERT_EQ(*store->Add("c", 1), 2);
  AddOnlyToTheSequence("job", "c");
  EXPECT_EQ(*store->Append("c", "0"), 2);
  EXPECT_EQ(*store->Get("c", absl::ZeroDuration()), "30");
  EXPECT_EQ(*store->Add("c", 1), 31);
}

// A transport failure after an add committed (its answer lost) is retried
// by the client; the add must count once, whichever way it was applied.
TEST_F(EtcdStoreTest, AnAddWhoseAnswerWasLostCountsOnce) {
  Faults faults;
  auto store = Open("job", "", &faults, absl::Seconds(2));
  auto lose = [&](int n) {
    absl::MutexLock lock(&faults.mu);
    faults.lose = n;
    faults.lost = 0;
  };
  // The first add (a compare-and-swap).
  lose(1);
  EXPECT_EQ(*store->Add("n", 5), 5);
  // An add of one (a put of the sequence).
  lose(1);
  EXPECT_EQ(*store->Add("n", 1), 6);
  // Another delta (a compare-and-swap of the sequence).
  lose(1);
  EXPECT_EQ(*store->Add("n", 3), 9);
  {
    absl::MutexLock lock(&faults.mu);
    EXPECT_EQ(faults.lost, 1);
  }
  EXPECT_EQ(*store->Get("n", absl::ZeroDuration()), "9");
  // Every retry's answer lost until the call's budget is spent: the add
  // settles its outcome itself.
  lose(1000);
  EXPECT_EQ(*store->Add("n", 1), 10);
  {
    absl::MutexLock lock(&faults.mu);
    EXPECT_GT(faults.lost, 1);
    faults.lose = 0;
  }
  EXPECT_EQ(*store->Add("n", 0), 10);
  EXPECT_EQ(*store->Get("n", absl::ZeroDuration()), "10");
  // The markers of the four adds that were sent more than once stay; the
  // others' are gone once their adds returned.
  const int64_t kept = RawCount("/distjob/job/agent/adds/");
  EXPECT_EQ(kept, 4);
  EXPECT_EQ(*store->Add("n", 1), 11);
  EXPECT_EQ(*store->Add("n", 2), 13);
  EXPECT_EQ(RawCount("/distjob/job/agent/adds/"), kept);
}

// A transaction whose answer was lost may still be in flight at a member
// and commit after its add returned (a proposal etcd replays late): its
// marker stays, so the late copy applies nothing.
TEST_F(EtcdStoreTest, AnAttemptThatCommitsAfterItsAddReturnedCountsNothing) {
  Faults faults;
  auto store = Open("job", "", &faults, absl::Seconds(2));
  ASSERT_EQ(*store->Add("n", 5), 5);
  std::vector<etcdserverpb::TxnRequest> late;
  for (int64_t delta : {1, 3}) {
    {
      absl::MutexLock lock(&faults.mu);
      faults.lose = 1;
      faults.lost_txns.clear();
    }
    ASSERT_TRUE(store->Add("n", delta).ok());
    absl::MutexLock lock(&faults.mu);
    ASSERT_EQ(faults.lost_txns.size(), 1u);
    late.push_back(faults.lost_txns[0]);
  }
  ASSERT_EQ(*store->Add("n", 0), 9);
  for (const auto& txn : late) {
    etcdserverpb::TxnResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    ASSERT_TRUE(RawKv()->Txn(&ctx, txn, &resp).ok());
    EXPECT_FALSE(resp.succeeded());
  }
  EXPECT_EQ(*store->Add("n", 0), 9);
  EXPECT_EQ(*store->Get("n", absl::ZeroDuration()), "9");
}

// Calls that arrive while another call adopts the job lease wait for its
// outcome, each within its own deadline, and share its failure instead of
// redoing the adoption one after another.
TEST_F(EtcdStoreTest, QueuedFirstCallsShareOneAdoptionWithinTheirDeadlines) {
  Faults faults;
  {
    absl::MutexLock lock(&faults.mu);
    faults.hold_grants = true;
  }
  auto store = Open("job", "", &faults);
  absl::Status adopter;
  std::thread first([&] { adopter = store->Set("a", "v").status(); });
  EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
    f->mu.AssertHeld();
    return f->held == 1;
  }));
  // A waiter that ignored its deadline would wait for the grant: released
  // after 20 s unless the waiter is back before.
  absl::Notification back;
  std::thread releaser([&] {
    if (!back.WaitForNotificationWithTimeout(absl::Seconds(20))) {
      absl::MutexLock lock(&faults.mu);
      faults.released = true;
    }
  });
  absl::Status waited;
  const absl::Time start = absl::Now();
  {
    ScopedCallDeadline deadline(start + absl::Milliseconds(300));
    waited = store->Set("b", "v").status();
  }
  const absl::Duration took = absl::Now() - start;
  back.Notify();
  releaser.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_LT(took, absl::Seconds(5));
  constexpr int kWaiters = 8;
  std::vector<absl::Status> results(kWaiters);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      results[i] = store->Set(absl::StrCat("w", i), "v").status();
    });
  }
  // Every waiter is parked on the adoption before it fails.
  EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
    f->mu.AssertHeld();
    return f->lease_waits == 1 + kWaiters;
  }));
  {
    absl::MutexLock lock(&faults.mu);
    faults.released = true;
    faults.hold_grants = false;
  }
  first.join();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(adopter.code(), absl::StatusCode::kPermissionDenied) << adopter;
  for (const auto& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  }
  {
    absl::MutexLock lock(&faults.mu);
    EXPECT_EQ(faults.held, 1);
  }
  // A later call adopts again.
  ASSERT_TRUE(store->Set("c", "v").ok());
  EXPECT_EQ(*store->Get("c", absl::ZeroDuration()), "v");
}

// An adoption that failed only because its caller's deadline passed is not
// the failure of a waiter with more time: that one adopts the lease itself.
TEST_F(EtcdStoreTest, AWaiterWithMoreTimeThanTheAdopterAdoptsItself) {
  Faults faults;
  {
    absl::MutexLock lock(&faults.mu);
    faults.hold_grants = true;
  }
  auto store = Open("job", "", &faults);
  const absl::Time adopter_deadline = absl::Now() + absl::Milliseconds(300);
  absl::Status adopter;
  std::thread first([&] {
    ScopedCallDeadline deadline(adopter_deadline);
    adopter = store->Set("a", "v").status();
  });
  absl::Status waiter;
  std::thread second([&] {
    EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
      f->mu.AssertHeld();
      return f->held == 1;
    }));
    waiter = store->Set("b", "v").status();
  });
  EXPECT_TRUE(faults.AwaitFor(+[](Faults* f) {
    f->mu.AssertHeld();
    return f->lease_waits == 1;
  }));
  // The held grant ends only once the adopter's deadline has passed.
  while (absl::Now() <= adopter_deadline) {
    absl::SleepFor(adopter_deadline - absl::Now() + absl::Milliseconds(1));
  }
  {
    absl::MutexLock lock(&faults.mu);
    faults.released = true;
    faults.hold_grants = false;
  }
  first.join();
  second.join();
  EXPECT_FALSE(adopter.ok());
  EXPECT_TRUE(waiter.ok()) << waiter;
  EXPECT_EQ(*store->Get("b", absl::ZeroDuration()), "v");
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

TEST_F(EtcdStoreTest, BlockingGetAndWatchWakeOnAnotherClientsWrite) {
  auto store = Open("job");
  // A writer: it holds the job's lease, so the keys outlive `other`.
  ASSERT_TRUE(store->Set("mine", "x").ok());
  auto listing = store->List("");
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  std::thread setter([&] {
    auto other = Open("job");
    // Written only once the reader's watch is parked on etcd: the test is
    // of the blocking path, not of a value already there.
    AwaitWatcherAbove(watchers);
    ASSERT_TRUE(other->Set("late", "v").ok());
  });
  EXPECT_EQ(*store->Get("late", absl::Seconds(20)), "v");
  setter.join();
  auto w = store->Watch("", listing->revision, absl::Seconds(5));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->first);
  auto quiet = store->Watch("", w->second, absl::Milliseconds(300));
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(quiet->first);
  auto now = store->Watch("", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->first);
  EXPECT_FALSE(store->Watch("", w->second, absl::ZeroDuration())->first);
}

// A rendezvous monitor's watch: a few prefixes at once, any of which
// answers it, and none of the keys beside them.
TEST_F(EtcdStoreTest, WatchAnyIsAnsweredByAnyOfItsPrefixesOnly) {
  auto store = Open("job");
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_TRUE(store->Set("c/x", "1").ok());
  auto quiet =
      store->WatchAny({"a/", "b/"}, listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->changed);
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  int64_t written = -1;
  std::thread setter([&] {
    auto other = Open("job");
    AwaitWatcherAbove(watchers);
    ASSERT_TRUE(other->Set("c/y", "1").ok());  // beside both: not a change
    auto rev = other->Set("b/k", "v");
    ASSERT_TRUE(rev.ok());
    written = *rev;
  });
  auto w = store->WatchAny({"a/", "b/"}, listing->revision, absl::Seconds(20));
  setter.join();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->changed);
  EXPECT_GE(w->revision, written);  // not answered by c/y before it
  EXPECT_EQ(*store->Get("b/k", absl::ZeroDuration()), "v");
  auto now =
      store->WatchAny({"a/", "b/"}, listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->changed);
}

TEST_F(EtcdStoreTest, TtlKeysExpireOnEtcdsClockAndTheWatchSeesIt) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("alive/n1", "x", absl::Seconds(1)).ok());
  auto listing = store->List("alive/");
  ASSERT_EQ(listing->entries.size(), 1u);
  EXPECT_GT(listing->entries[0].ttl_left, absl::ZeroDuration());
  EXPECT_LE(listing->entries[0].ttl_left, absl::Seconds(2));
  EXPECT_LT(listing->entries[0].age, absl::Seconds(2));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  int64_t rev = listing->revision;
  while (*store->Check({"alive/n1"}) && absl::Now() < deadline) {
    auto w = store->Watch("alive/", rev, deadline - absl::Now());
    ASSERT_TRUE(w.ok());
    rev = w->second;
  }
  EXPECT_FALSE(*store->Check({"alive/n1"}));
}

// Heartbeats rewrite ctl/alive/<node> with the value it holds, under the
// ctl/ prefix every node's monitor watches: each must be a lease renewal
// that wakes nobody, or N nodes wake each other N times a heartbeat.
TEST_F(EtcdStoreTest, RenewingATtlKeyWithItsValueWakesNoWatcher) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(5)).ok());
  auto listing = store->List("ctl/");
  ASSERT_TRUE(listing.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(5)).ok());
  }
  auto quiet = store->Watch("ctl/", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->first);
  EXPECT_EQ(*store->Get("ctl/alive/n1", absl::ZeroDuration()), "x");
  // Another value is a change.
  ASSERT_TRUE(store->Set("ctl/alive/n1", "y", absl::Seconds(5)).ok());
  auto changed = store->Watch("ctl/", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed->first);
  // A key another client deleted comes back with the next heartbeat.
  auto other = Open("job");
  ASSERT_EQ(*other->Delete({"ctl/alive/n1"}), 1);
  ASSERT_TRUE(store->Set("ctl/alive/n1", "y", absl::Seconds(5)).ok());
  EXPECT_EQ(*other->Get("ctl/alive/n1", absl::ZeroDuration()), "y");
  // A renewed key still expires with its lease once renewals stop: the
  // writer leaving revokes it at once.
  store->Close();
  EXPECT_FALSE(*other->Check({"ctl/alive/n1"}));
}

// Every node's heartbeat renews its lease: a message on the client's one
// long-lived keep-alive stream, not a stream per renewal (4,096 simulated
// nodes made etcd set up and tear down 4,096 streams a second). A stream
// that breaks is opened again.
TEST_F(EtcdStoreTest, RenewalsShareOneKeepAliveStreamReopenedAfterALoss) {
  const std::string streams =
      "grpc_server_started_total{grpc_method=\"LeaseKeepAlive\","
      "grpc_service=\"etcdserverpb.Lease\",grpc_type=\"bidi_stream\"}";
  auto store = Open("job");
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  const int64_t before = std::max<int64_t>(0, Metric(streams));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  }
  // (The job lease's own keep-alive may have opened it already.)
  EXPECT_LE(Metric(streams) - before, 1);
  auto listing = store->List("ctl/");
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(listing->entries.size(), 1u);
  ASSERT_NO_FATAL_FAILURE(Restart());
  // The stream broke with etcd: the next renewals go on a new one.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status renewed;
  do {
    renewed = store->Set("ctl/alive/n1", "x", absl::Seconds(30)).status();
  } while (!renewed.ok() && absl::Now() < deadline);
  ASSERT_TRUE(renewed.ok()) << renewed;
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  EXPECT_EQ(*store->Get("ctl/alive/n1", absl::ZeroDuration()), "x");
  // The restarted etcd counts from 0: one stream, or two where the first
  // met etcd still starting.
  EXPECT_GE(Metric(streams), 1);
  EXPECT_LE(Metric(streams), 2);
  auto quiet = store->Watch("ctl/", listing->revision, absl::ZeroDuration());
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->first) << "a renewal rewrote the key";
}

// A renewal whose caller gave up may still be answered: that answer is its
// own, not the next renewal's (which would then count its lease renewed
// from its own start, before etcd renewed it).
TEST_F(EtcdStoreTest, ALateKeepAliveAnswerIsNotTakenForTheNextRenewals) {
  Faults faults;
  auto store = Open("job", "", &faults);
  ASSERT_TRUE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  const int64_t lease = RawLease("/distjob/job/kv/ctl/alive/n1");
  ASSERT_NE(lease, 0);
  {
    absl::MutexLock lock(&faults.mu);
    faults.hold_lease = lease;
  }
  std::thread renewer;
  // Whatever fails below: nothing stays held (the store's reader thread
  // would block its Close) and the renewer is joined.
  absl::Cleanup unhold = [&] {
    {
      absl::MutexLock lock(&faults.mu);
      faults.hold_lease = 0;
    }
    if (renewer.joinable()) renewer.join();
  };
  auto release = [&](int n) {
    absl::MutexLock lock(&faults.mu);
    faults.permits += n;
  };
  {
    // Its answer is held past its caller's deadline.
    ScopedCallDeadline soon(absl::Now() + absl::Milliseconds(300));
    EXPECT_FALSE(store->Set("ctl/alive/n1", "x", absl::Seconds(30)).ok());
  }
  ASSERT_TRUE(faults.AwaitFor(+[](Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   f->mu) { return f->answers_arrived == 1; }));
  std::atomic<bool> second_done{false};
  absl::Status second;
  renewer = std::thread([&] {
    second = store->Set("ctl/alive/n1", "x", absl::Seconds(30)).status();
    second_done = true;
  });
  ASSERT_TRUE(faults.AwaitFor(+[](Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   f->mu) { return f->renewals_sent == 2; }));
  // The first answer goes through; the second renewal's own is held.
  release(1);
  ASSERT_TRUE(faults.AwaitFor(+[](Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   f->mu) { return f->answers_arrived == 2; }));
  // Given time to finish, it does not: its own answer is still held.
  EXPECT_FALSE(
      WaitFor([&] { return second_done.load(); }, absl::Milliseconds(300)))
      << "answered by the first renewal's answer";
  release(1);
  renewer.join();
  EXPECT_TRUE(second.ok()) << second;
}

// A node's heartbeat adds its waiting key to its alive key while it waits
// for a round: the added key goes under the lease the heartbeat renews,
// not a lease of its own (a grant, a Raft commit, per node).
TEST_F(EtcdStoreTest, AKeyAddedToARenewedHeartbeatSharesItsLease) {
  auto store = Open("job");
  auto other = Open("job");
  ASSERT_TRUE(store->Set("ctl/alive/n1", "1", absl::Seconds(30)).ok());
  ASSERT_TRUE(store->Set("ctl/alive/n1", "1", absl::Seconds(30)).ok());
  ASSERT_TRUE(other->Set("unrelated", "x").ok());
  const int64_t grants = Requests("LeaseGrant", "Lease");
  ASSERT_GE(grants, 0);
  ASSERT_TRUE(store
                  ->MultiSet({{"ctl/alive/n1", "1"}, {"ctl/waiting/n1", "1"}},
                             absl::Seconds(30))
                  .ok());
  ASSERT_TRUE(store
                  ->MultiSet({{"ctl/alive/n1", "1"}, {"ctl/waiting/n1", "1"}},
                             absl::Seconds(30))
                  .ok());
  EXPECT_EQ(Requests("LeaseGrant", "Lease") - grants, 0);
  EXPECT_EQ(*other->Get("ctl/waiting/n1", absl::ZeroDuration()), "1");
  // Both go with the lease when their writer leaves.
  store->Close();
  EXPECT_FALSE(*other->Check({"ctl/alive/n1"}));
  EXPECT_FALSE(*other->Check({"ctl/waiting/n1"}));
}

// A round's rank records and join records go in one request per 1,024
// (rendezvous/dynamic_rendezvous.cc); etcd takes at most 128 operations a
// transaction by default.
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

TEST_F(EtcdStoreTest, LastAgentOutRevokesTheJobsKeysSoARerunStartsClean) {
  auto first = Open("job");
  auto second = Open("job");
  ASSERT_TRUE(first->Set("state", "round 3").ok());
  ASSERT_TRUE(second->Add("count", 1).ok());
  first->Close();
  // Keys written by an agent that left stay while the job lives on.
  EXPECT_EQ(*second->Get("state", absl::ZeroDuration()), "round 3");
  second->Close();
  auto rerun = Open("job");
  EXPECT_EQ(*rerun->NumKeys(), 0);
  ASSERT_TRUE(rerun->Set("state", "round 0").ok());
  EXPECT_EQ(*rerun->Get("state", absl::ZeroDuration()), "round 0");
}

TEST_F(EtcdStoreTest, CloseCancelsABlockedWatchAndLaterCalls) {
  auto store = Open("job");
  ASSERT_TRUE(store->Set("k", "v").ok());
  auto listing = store->List("");
  absl::StatusOr<std::pair<bool, int64_t>> w;
  const int64_t watchers = Watchers();
  ASSERT_GE(watchers, 0);
  const absl::Time start = absl::Now();
  std::thread watcher(
      [&] { w = store->Watch("", listing->revision, absl::Seconds(60)); });
  // Closed once the watch is parked on etcd: the blocked path is tested.
  AwaitWatcherAbove(watchers);
  store->Close();
  watcher.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kCancelled) << w.status();
  EXPECT_EQ(store->Get("k", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kCancelled);
}

// Closed between the adoption's registration as a holder and its record of
// the leases: the adoption must start no keep-alive thread that Close has
// already passed (never joined: std::terminate), and its holder lease must
// be revoked, not left to keep the job's keys alive.
TEST_F(EtcdStoreTest, CloseDuringAJobLeaseAdoptionRevokesItsHolderLease) {
  auto o = ParseEtcdOptions(endpoint_, "", "job");
  ASSERT_TRUE(o.ok()) << o.status();
  o->rpc_timeout = absl::Seconds(10);
  EtcdStore* store = nullptr;
  std::thread closer;
  bool refused = false;
  o->test_hooks.adopted = [&] {
    closer = std::thread([&] { store->Close(); });
    // Close has begun once this thread's calls are refused.
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!refused && absl::Now() < deadline) {
      refused = absl::IsCancelled(store->NumKeys().status());
    }
  };
  auto opened = EtcdStore::Connect(*o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store = opened->get();
  auto set = store->Set("k", "v");
  closer.join();
  EXPECT_TRUE(refused);
  EXPECT_TRUE(absl::IsCancelled(set.status())) << set.status();
  EXPECT_EQ(RawCount("/distjob/job/agent/holders/"), 0);
  EXPECT_EQ(RawCount("/distjob/job/kv/"), 0);
}

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

// A watch that sees nothing change ends at the caller's deadline when that
// comes before its own timeout, and is "unchanged": the cluster answered.
TEST_F(EtcdStoreTest, AQuietWatchEndsAtTheCallersDeadline) {
  auto store = Open("job");
  auto listing = store->List("");
  ASSERT_TRUE(listing.ok()) << listing.status();
  {
    const absl::Time start = absl::Now();
    ScopedCallDeadline soon(start + absl::Milliseconds(500));
    auto w = store->WatchAny({"quiet/"}, listing->revision, absl::Seconds(60));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_FALSE(w->changed);
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
  // A window that ends before etcd can answer says nothing of etcd's
  // health: a blocking read near its end is still a timeout.
  auto brief =
      store->WatchAny({"quiet/"}, listing->revision, absl::Microseconds(1));
  ASSERT_TRUE(brief.ok()) << brief.status();
  EXPECT_FALSE(brief->changed);
  EXPECT_EQ(store->MultiGet({"never"}, absl::Microseconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// No member holds the watch: an error naming the cluster, not "no change"
// (the rendezvous monitor counts errors towards read_timeout and then
// reports the store lost), by the caller's deadline.
TEST(EtcdStoreNoServerTest, AWatchOfAnUnreachableClusterFailsNamingIt) {
  auto o = ParseEtcdOptions("127.0.0.1:1,127.0.0.1:2", "", "job");
  ASSERT_TRUE(o.ok());
  auto store = EtcdStore::Connect(*o);
  ASSERT_TRUE(store.ok());
  for (const absl::Duration timeout : {absl::Seconds(1), absl::Seconds(60)}) {
    const absl::Time start = absl::Now();
    ScopedCallDeadline within(start + absl::Seconds(2));
    auto w = (*store)->WatchAny({"x/"}, 0, timeout);
    EXPECT_EQ(w.status().code(), absl::StatusCode::kUnavailable) << w.status();
    EXPECT_NE(w.status().message().find("127.0.0.1:1,127.0.0.1:2"),
              std::string::npos)
        << w.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
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

TEST(EtcdOptionsTest, EmptyOrGarbageEndpointsAreRefused) {
  for (const char* bad :
       {"", " , ", "unix:///run/etcd.sock", "h:x", "a:b:c", "h 1:2379", "-h",
        "h:0", "h:99999", "[h]:1", "http://"}) {
    auto o = ParseEtcdOptions(bad, "", "r");
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.status().message().find("--rdzv-endpoint"), std::string::npos);
  }
  for (const char* bad :
       {"read_timeout=nan", "read_timeout=inf", "etcd_session_ttl=1e400"}) {
    EXPECT_FALSE(ParseEtcdOptions("h", bad, "r").ok()) << bad;
  }
  EXPECT_EQ(ParseEtcdOptions("https://[fd00::1]/", "", "r")->endpoints,
            (std::vector<std::string>{"[fd00::1]:2379"}));
}

TEST(EtcdOptionsTest, ParsesEndpointsAndConf) {
  auto o = ParseEtcdOptions(
      "http://h1:2379, h2,[::1]:3000",
      "etcd_prefix=/p/,read_timeout=7,ca_cert=/ca.pem,join_timeout=9", "r");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->endpoints,
            (std::vector<std::string>{"h1:2379", "h2:2379", "[::1]:3000"}));
  EXPECT_EQ(o->prefix, "/p");
  EXPECT_EQ(o->rpc_timeout, absl::Seconds(7));
  EXPECT_EQ(o->ca_cert, "/ca.pem");
  EXPECT_EQ(ParseEtcdOptions("h", "etcd_prefix=rel", "r").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseEtcdOptions("h", "cert=/c.pem", "r").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseEtcdOptions("h", "read_timeout=x", "r").status().code(),
            absl::StatusCode::kInvalidArgument);
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
