// A real etcd member on loopback for the etcd client's tests (a fixture
// that forks /usr/bin/etcd per test), and a flaky transport to put between
// it and a store (etcd::Hooks).
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_ETCD_FIXTURE_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_ETCD_FIXTURE_H_

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/hooks.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/etcd/store.h"
#include "rendezvous/store/etcd/testing.h"

namespace distjob {

// A free loopback port: the project's own helper, asserted here.
int FreePort();

// Whether `cond` holds within `within` (polled every 5 ms).
bool WaitFor(const std::function<bool()>& cond, absl::Duration within);

// A flaky transport between a store and etcd (etcd::Hooks):
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

// Hooks that put `faults` between a store and etcd: interceptors on every
// channel, and a count of the calls that wait for a job-lease adoption.
etcd::Hooks FaultHooks(Faults* faults);

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
    auto s = EtcdStoreTesting::Connect(
        *o, faults == nullptr ? etcd::Hooks{} : FaultHooks(faults));
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

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_ETCD_FIXTURE_H_
