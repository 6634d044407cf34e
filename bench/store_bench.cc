// Load generator for the store benchmarks in bench/run.py; prints one JSON
// object per measurement on stdout.
//
//   store_bench server [MAX_NODES [QUEUES]]
//       hosts the embedded store on 127.0.0.1 (a free port, printed as
//       "port N") with the limits the agent gives a job of up to MAX_NODES
//       nodes (QUEUES: that many completion queues instead), in its own
//       process so its CPU time can be read from /proc; exits at EOF on
//       stdin.
//   store_bench ops ENDPOINT OP CLIENTS SECONDS [sync]
//       CLIENTS threads, one gRPC channel each, run OP (get, set, add,
//       compare_set, set_get: a set then a get of the same key, wait: a
//       blocking get of a key that exists) back to back for SECONDS; ops/s,
//       p50 and p99 latency. With "sync": prints "ready" once connected,
//       starts at a line on stdin and prints every latency (ns, a JSON
//       list), so that several processes' samples can be merged.
//   store_bench scale ENDPOINT RUN_ID NODES FIRST COUNT HB_SECONDS [KEEP_S]
//       COUNT simulated nodes (node FIRST.. of NODES) run the real
//       DynamicRendezvous join over a few shared channels (a connection
//       each), so thousands fit in one process. Waits for a "go" line on stdin,
//       joins, reports when the last of its nodes got the round, then counts
//       the store requests its nodes make in HB_SECONDS of steady state
//       (heartbeats, watches). KEEP_S: the nodes' keep_alive_interval in
//       seconds (default 1; the agent's own default is 5). The join's
//       reply counts its requests by method and key kind (by_method).
//   store_bench recover ENDPOINT RUN_ID NODES FIRST COUNT MIN LAST_CALL_S
//       As scale, with --nnodes MIN:NODES: forms a round at "go", then on
//       "kill K" stops node K's heartbeat if it is one of this process's
//       (a crash: its lease runs out) and reports when the last of its
//       survivors holds the next round; then on "join J" a new node J (not
//       one of the first NODES) joins in the process of FIRST 0, and every
//       member reports when it holds the round that takes J in. The kill
//       phase's reply counts its requests by method and key kind
//       (by_method; "WatchAny/N(timeout)": a watch of N prefixes).
//       ENDPOINT etcd:HOST:PORT[,HOST:PORT...] runs the same nodes against
//       an etcd cluster through the agent's etcd client (`--rdzv-backend
//       etcd`) instead of the embedded store.
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/fd_budget.h"
#include "common/json.h"
#include "common/logging.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/host_store_limits.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/etcd/store.h"
#include "rendezvous/store/grpc_store_client.h"
#include "rendezvous/store/server/store_server.h"

namespace distjob {
namespace {

// One line of JSON on stdout, for bench/run.py.
void PrintJson(const Json& value) {
  std::printf("%s\n", DumpJson(value).c_str());
  std::fflush(stdout);
}

long long NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// This process's CPU time, all threads.
long long CpuNs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Gives this process a futex hash table of about 4 buckets per thread of
// its `threads`, so that a chain holds about one waiter. Linux 6.16+ gives a
// threaded process a private table sized by the CPUs, not the threads: 16
// buckets on this 2-CPU machine (prctl PR_FUTEX_HASH_GET_SLOTS answers 16 at 1
// or 2,000 threads). With a simulator's thousands of node threads parked on
// their calls, every wake walked a bucket's chain of hundreds of waiters:
// futex_wake was ~15 % of the simulated nodes' CPU (perf, 16,384 nodes). A real
// node's agent has a few threads and never meets this. Older kernels refuse the
// call (said on stderr), and the simulator runs as before.
void SizeFutexHash(int threads) {
  constexpr int kPrFutexHash = 78;         // PR_FUTEX_HASH
  constexpr int kPrFutexHashSetSlots = 1;  // PR_FUTEX_HASH_SET_SLOTS
  unsigned long slots = 16;
  while (slots < 4UL * static_cast<unsigned long>(threads)) slots *= 2;
  if (prctl(kPrFutexHash, kPrFutexHashSetSlots, slots, 0, 0) != 0) {
    std::fprintf(stderr, "store_bench: futex hash of %lu buckets: %s\n", slots,
                 std::strerror(errno));
  }
}

// The log's clock (STORE_BENCH_LOG), to place its lines on NowNs's.
long long WallNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// As the agent hosts it for a job of up to `max_nodes`.
int Server(int max_nodes, int queues) {
  StoreLimits limits = HostStoreLimits(max_nodes);
  if (queues > 0) limits.completion_queues = static_cast<size_t>(queues);
  // Every simulated node calls from 127.0.0.1, where each real node has an
  // address of its own: the per-address cap on parked waits (8192) would
  // refuse half the waits of a 16,384-node round, which real nodes never
  // meet. The store-wide caps stay as the agent sets them.
  limits.max_waiters_per_peer = limits.max_waiters;
  auto server = StoreServer::Start("127.0.0.1", 0, limits);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("port %d\n", (*server)->port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*server)->Shutdown();
  return 0;
}

int Ops(const std::string& endpoint, const std::string& op, int clients,
        double seconds, bool sync) {
  std::vector<std::vector<int64_t>> lat(clients);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < clients; ++t) {
    pool.emplace_back([&, t] {
      auto c = GrpcStoreClient::Connect(endpoint, absl::Seconds(30));
      const std::string key = absl::StrCat("bench/", t);
      if (!c->Set(key, "x").ok()) ++errors;
      lat[t].reserve(1 << 16);
      ++ready;
      while (!go) std::this_thread::yield();
      while (!stop) {
        const long long s = NowNs();
        bool ok;
        if (op == "set") {
          ok = c->Set(key, "x").ok();
        } else if (op == "get") {
          ok = c->Get(key, absl::ZeroDuration()).ok();
        } else if (op == "set_get") {
          ok = c->Set(key, "x").ok() && c->Get(key, absl::ZeroDuration()).ok();
        } else if (op == "wait") {
          ok = c->Get(key, absl::Seconds(30)).ok();
        } else if (op == "add") {
          ok = c->Add(key + "/n", 1).ok();
        } else {
          ok = c->CompareSet(key, "x", "x").ok();
        }
        lat[t].push_back(NowNs() - s);
        if (!ok) ++errors;
      }
    });
  }
  while (ready < clients) absl::SleepFor(absl::Milliseconds(1));
  if (sync) {
    std::printf("ready\n");
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
  }
  go = true;
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  std::vector<int64_t> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  if (sync) {
    PrintJson(Json(all));
    return errors > 0 ? 1 : 0;
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0
                       : all[static_cast<size_t>(p * (all.size() - 1))] / 1e9;
  };
  PrintJson({{"ops_per_s", all.size() / seconds},
             {"p50", pct(0.5)},
             {"p99", pct(0.99)},
             {"n", all.size()},
             {"errors", errors.load()}});
  return errors > 0 ? 1 : 0;
}

// Requests by method and key kind ("Get rank", "WatchAny state timeout"),
// for the per-method breakdown of a recovery (bench/run.py reads it).
class MethodTally {
 public:
  void Note(absl::string_view method, absl::string_view key) {
    // The kind is the key's first segment after the run's prefix
    // ("rdzv/RUN/rank/3/..." -> "rank").
    std::vector<absl::string_view> parts =
        absl::StrSplit(key, '/', absl::SkipEmpty());
    absl::string_view kind = parts.size() > 2 ? parts[2] : "-";
    absl::MutexLock l(&mu_);
    ++counts_[absl::StrCat(method, " ", kind)];
  }
  // The counts since the last call, as a JSON object.
  Json TakeJson() {
    absl::MutexLock l(&mu_);
    Json out = Json::object();
    for (const auto& [k, v] : counts_) out[k] = v;
    counts_.clear();
    return out;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, long> counts_ ABSL_GUARDED_BY(mu_);
};

MethodTally* Tally() {
  static MethodTally* t = new MethodTally;
  return t;
}

// Forwards to a channel shared by many simulated nodes and counts the
// requests, since the server keeps no per-request statistics.
class SharedStore : public StoreInterface {
 public:
  // `renewals`, if set, also counts the lease writes (a TTL) among them.
  // `one_request_join`: `s` joins and lists in one request
  // (AddRecordThenList); otherwise its requests are counted one by one.
  SharedStore(StoreInterface* s, std::atomic<long>* n,
              std::atomic<long>* renewals = nullptr,
              bool one_request_join = true)
      : s_(s),
        n_(n),
        renewals_(renewals),
        one_request_join_(one_request_join) {}
  [[nodiscard]] absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    ++*n_;
    if (renewals_ != nullptr && ttl > absl::ZeroDuration()) ++*renewals_;
    Tally()->Note(ttl > absl::ZeroDuration() ? "MultiSet(ttl)" : "MultiSet",
                  kvs.empty() ? "" : kvs[0].first);
    return s_->MultiSet(kvs, ttl);
  }
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override {
    ++*n_;
    Tally()->Note("MultiGet", keys.empty() ? "" : keys[0]);
    return s_->MultiGet(keys, timeout);
  }
  [[nodiscard]] absl::StatusOr<int64_t> Add(const std::string& key,
                                            int64_t delta) override {
    ++*n_;
    Tally()->Note("Add", key);
    return s_->Add(key, delta);
  }
  [[nodiscard]] absl::StatusOr<AddRecordResult> AddThenRecord(
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) override {
    ++*n_;
    Tally()->Note("AddThenRecord", key);
    return s_->AddThenRecord(key, delta, record_prefix, record);
  }
  [[nodiscard]] absl::StatusOr<AddRecordResult> LeaseThenAddRecord(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record) override {
    ++*n_;  // a join: not among the renewals
    Tally()->Note("LeaseThenAddRecord", key);
    return s_->LeaseThenAddRecord(lease, ttl, key, delta, record_prefix,
                                  record);
  }
  [[nodiscard]] absl::StatusOr<AddRecordListing> AddRecordThenList(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record,
      const std::string& list_prefix) override {
    if (!one_request_join_) {
      // etcd's: the lease, the add, the record and the listing, each
      // counted as this store's default makes them.
      return StoreInterface::AddRecordThenList(
          lease, ttl, key, delta, record_prefix, record, list_prefix);
    }
    ++*n_;  // a join with its read: not among the renewals
    Tally()->Note("AddRecordThenList", key);
    return s_->AddRecordThenList(lease, ttl, key, delta, record_prefix, record,
                                 list_prefix);
  }
  [[nodiscard]] absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override {
    ++*n_;
    Tally()->Note("CompareSet", key);
    return s_->CompareSet(key, expected, desired);
  }
  [[nodiscard]] absl::StatusOr<int64_t> Append(
      const std::string& key, const std::string& value) override {
    ++*n_;
    Tally()->Note("Append", key);
    return s_->Append(key, value);
  }
  [[nodiscard]] absl::StatusOr<bool> Check(
      const std::vector<std::string>& keys) override {
    ++*n_;
    Tally()->Note("Check", keys.empty() ? "" : keys[0]);
    return s_->Check(keys);
  }
  [[nodiscard]] absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override {
    ++*n_;
    Tally()->Note("Delete", keys.empty() ? "" : keys[0]);
    return s_->Delete(keys);
  }
  [[nodiscard]] absl::StatusOr<int64_t> NumKeys() override {
    ++*n_;
    Tally()->Note("NumKeys", "");
    return s_->NumKeys();
  }
  [[nodiscard]] absl::StatusOr<StoreListing> ListPage(
      const std::string& prefix, const std::string& start_after,
      size_t limit) override {
    ++*n_;
    Tally()->Note("ListPage", prefix);
    return s_->ListPage(prefix, start_after, limit);
  }
  [[nodiscard]] absl::StatusOr<WatchResult> WatchAny(
      const std::vector<std::string>& prefixes, int64_t after_revision,
      absl::Duration timeout) override {
    ++*n_;
    auto r = s_->WatchAny(prefixes, after_revision, timeout);
    // The prefix count tells a monitor's watch (2 or 3) from a join's (1).
    Tally()->Note(absl::StrCat("WatchAny/", prefixes.size(),
                               !r.ok()       ? "(error)"
                               : !r->changed ? "(timeout)"
                               : r->change   ? "(told)"
                                             : ""),
                  prefixes.empty() ? "" : prefixes[0]);
    return r;
  }

 private:
  StoreInterface* s_;
  std::atomic<long>* n_;
  std::atomic<long>* renewals_;
  const bool one_request_join_;
};

// Renewing threads for `count` simulated nodes: each renews at most 16
// nodes a second, one after another with blocking calls, so that a pass
// stays well inside the interval as each real node's own heartbeat thread
// does: with 8 threads a process, a pass over a shard of 256 nodes
// outlasted a 1 s interval during a 16,384-node join, and one of 128 a
// recovery's 3 s lease.
int RenewingThreads(int count, absl::Duration interval) {
  const int per_thread =
      std::max(16, static_cast<int>(16 * absl::ToDoubleSeconds(interval)));
  return std::max(8, (count + per_thread - 1) / per_thread);
}

// Renews the leases of many simulated nodes from a few threads, each when
// its own heartbeat thread would (DynamicRendezvous::NextRenewal: an
// interval after its last renewal, a join's included): a thread per node
// for 16,384 nodes is over the kernel's pid_max.
class Heartbeats {
 public:
  Heartbeats(absl::Duration interval, int threads)
      : interval_(interval), shards_(threads) {}
  ~Heartbeats() { Stop(); }
  void Add(int id, DynamicRendezvous* sim) {
    Shard& s = shards_[id % shards_.size()];
    absl::MutexLock lock(&s.mu);
    s.sims.push_back({id, sim, absl::Now()});
  }
  // After this, node `id` is renewed no more (and may be destroyed).
  void Remove(int id) {
    Shard& s = shards_[id % shards_.size()];
    absl::MutexLock lock(&s.mu);
    s.sims.erase(std::remove_if(s.sims.begin(), s.sims.end(),
                                [id](const auto& e) { return e.id == id; }),
                 s.sims.end());
  }
  // The first renewals one interval from now at the latest, as a heartbeat
  // thread's.
  void Start() {
    for (size_t i = 0; i < shards_.size(); ++i) {
      threads_.emplace_back([this, i] { Run(&shards_[i]); });
    }
  }
  void Stop() {
    {
      absl::MutexLock lock(&stop_mu_);
      stop_ = true;
    }
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  struct Sim {
    int id;
    DynamicRendezvous* sim;
    absl::Time last_attempt;  // of this renewer (a join's is the node's)
  };
  struct Shard {
    absl::Mutex mu;
    std::vector<Sim> sims ABSL_GUARDED_BY(mu);
  };
  void Run(Shard* s) {
    const absl::Time start = absl::Now();
    {
      absl::MutexLock lock(&s->mu);
      for (Sim& e : s->sims) e.last_attempt = start;
    }
    absl::Time next = start + interval_;
    for (;;) {
      {
        absl::MutexLock lock(&stop_mu_);
        if (stop_mu_.AwaitWithDeadline(absl::Condition(&stop_), next)) return;
      }
      // Every node that is due, then a wait for the next one due (a 10 ms
      // tick at the most, so that a pass over thousands stays a pass).
      next = absl::Now() + interval_;
      absl::MutexLock lock(&s->mu);
      for (Sim& e : s->sims) {
        absl::Time due = e.sim->NextRenewal(e.last_attempt);
        if (absl::Now() >= due) {
          e.last_attempt = absl::Now();
          e.sim->RenewLease();
          due = e.sim->NextRenewal(e.last_attempt);
        }
        next = std::min(next, due);
      }
      next = std::max(next, absl::Now() + absl::Milliseconds(10));
    }
  }
  const absl::Duration interval_;
  std::vector<Shard> shards_;
  std::vector<std::thread> threads_;
  absl::Mutex stop_mu_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
};

// The store the simulated nodes share: the embedded store's gRPC client,
// or with "etcd:" the agent's etcd client, as `--rdzv-backend etcd` makes it.
absl::StatusOr<std::unique_ptr<StoreInterface>> ScaleClient(
    const std::string& endpoint, const std::string& run_id) {
  absl::string_view etcd = endpoint;
  if (!absl::ConsumePrefix(&etcd, "etcd:")) {
    return std::unique_ptr<StoreInterface>(GrpcStoreClient::Connect(
        endpoint, absl::Seconds(300), {}, /*own_connection=*/true,
        /*poll_for_answers=*/false));
  }
  auto options =
      ParseEtcdOptions(std::string(etcd), "read_timeout=300", run_id);
  if (!options.ok()) return options.status();
  auto store = EtcdStore::Connect(*std::move(options));
  if (!store.ok()) return store.status();
  return std::unique_ptr<StoreInterface>(*std::move(store));
}

int Scale(const std::string& endpoint, const std::string& run_id, int nodes,
          int first, int count, double hb_seconds, double keep_alive_s) {
  // Each node's thread, and its monitor's once it holds the round.
  SizeFutexHash(2 * count);
  // A channel multiplexes many calls; a few spread them over connections.
  const int channels = std::min(count, 8);
  std::vector<std::unique_ptr<StoreInterface>> clients;
  for (int i = 0; i < channels; ++i) {
    auto c = ScaleClient(endpoint, run_id);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 2;
    }
    clients.push_back(*std::move(c));
  }
  std::atomic<long> requests{0};
  std::vector<std::unique_ptr<DynamicRendezvous>> sims;
  const absl::Duration keep_alive = absl::Seconds(keep_alive_s);
  Heartbeats heartbeats(keep_alive, RenewingThreads(count, keep_alive));
  for (int i = 0; i < count; ++i) {
    DynamicRendezvousOptions o;
    o.run_id = run_id;
    o.min_nodes = o.max_nodes = nodes;
    o.node = absl::StrCat("sim", first + i);
    o.addr = "127.0.0.1";
    o.config.join_timeout = absl::Seconds(300);
    o.config.keep_alive_interval = keep_alive;
    o.config.read_timeout = absl::Seconds(300);
    o.heartbeat_thread = false;
    sims.push_back(std::make_unique<DynamicRendezvous>(
        o, std::make_unique<SharedStore>(
               clients[i % channels].get(), &requests, nullptr,
               !absl::StartsWith(endpoint, "etcd:"))));
    heartbeats.Add(i, sims.back().get());
  }
  // Each node's thread exists before the go signal, as a real node's agent
  // runs before its rendezvous starts: creating thousands of threads after
  // it was part of the timed join (a simulator-only cost).
  absl::Notification go;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (auto& s : sims) {
    threads.emplace_back([&ok, &s, &go] {
      go.WaitForNotification();
      ok += s->Next(1).ok() ? 1 : 0;
    });
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
  const long long start = NowNs();
  const long long cpu_start = CpuNs();
  heartbeats.Start();
  go.Notify();
  for (auto& t : threads) t.join();
  const long long done = NowNs();
  PrintJson({{"start_ns", start},
             {"done_ns", done},
             {"cpu_ns", CpuNs() - cpu_start},
             {"joined", ok.load()},
             {"join_requests", requests.load()},
             {"by_method", Tally()->TakeJson()}});
  // Steady state: only heartbeats and the watchers they wake.
  absl::SleepFor(absl::Milliseconds(500));
  requests = 0;
  absl::SleepFor(absl::Seconds(hb_seconds));
  PrintJson({{"steady_requests", requests.load()}});
  // The process exits without tearing down thousands of rendezvous: the
  // bench throws the store away anyway.
  _exit(ok == count ? 0 : 1);
}

// Which simulated nodes were told of a membership change in one phase.
class Changes {
 public:
  explicit Changes(int count) : seen_(count, 0), count_(count, 0) {}
  void Note(int i) {
    const long long now = NowNs();
    absl::MutexLock lock(&mu_);
    seen_[i] = phase_;
    ++count_[i];
    if (first_ns_ == 0) first_ns_ = now;
    last_ns_ = std::max(last_ns_, now);
  }
  // When the first and the last node heard of a change in this phase (0:
  // none did), for the recovery's timeline.
  std::pair<long long, long long> Told() {
    absl::MutexLock lock(&mu_);
    return {first_ns_, last_ns_};
  }
  int Count(int i) {
    absl::MutexLock lock(&mu_);
    return count_[i];
  }
  // Whether node i heard of a change since Count(i) was `before`.
  bool AwaitAbove(int i, int before, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto heard = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return count_[i] > before;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&heard), deadline);
  }
  void NextPhase() {
    absl::MutexLock lock(&mu_);
    ++phase_;
    first_ns_ = last_ns_ = 0;
  }
  // Whether node i heard of a change in this phase, by `deadline`.
  bool Await(int i, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto heard = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return seen_[i] == phase_;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&heard), deadline);
  }

 private:
  absl::Mutex mu_;
  int phase_ ABSL_GUARDED_BY(mu_) = 1;
  long long first_ns_ ABSL_GUARDED_BY(mu_) = 0;
  long long last_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<int> count_ ABSL_GUARDED_BY(mu_);
};

// One process's share of the recovery benchmark: `count` simulated nodes
// (global ids first...) of an elastic job of `nodes`, which form a round,
// lose a node and take in a new one, each phase on the driver's word
// (stdin), with its timeline on stdout.
class Recovery {
 public:
  Recovery(const std::string& endpoint, const std::string& run_id, int nodes,
           int first, int count, int min_nodes, double last_call_s,
           double keep_alive_s)
      : run_id_(run_id),
        nodes_(nodes),
        first_(first),
        count_(count),
        min_nodes_(min_nodes),
        last_call_(absl::Seconds(last_call_s)),
        keep_alive_(absl::Seconds(keep_alive_s)),
        // 8 shards of 128 nodes took over a lease (3 s) per pass while the
        // survivors re-joined, and whole shards of live nodes were seen
        // lost (bench/recover_timeline.py).
        heartbeats_(keep_alive_, RenewingThreads(count, keep_alive_)),
        changes_(count + 1) {
    SizeFutexHash(2 * count);  // as in Scale
    const int channels = std::min(count, 8);
    for (int i = 0; i < channels; ++i) {
      clients_.push_back(GrpcStoreClient::Connect(endpoint, absl::Seconds(300),
                                                  {},
                                                  /*own_connection=*/true,
                                                  /*poll_for_answers=*/false));
    }
    for (int i = 0; i < count; ++i) AddSim(first + i, i);
  }

  // The three phases; the exit code when the driver's word is missing,
  // else the process ends (as the other modes: no teardown of thousands
  // of nodes) with 0 when every live node took the last round.
  int Run() {
    std::printf("ready\n");
    std::fflush(stdout);
    for (int i = 0; i < count_; ++i) live_.push_back(i);
    std::string line;
    std::getline(std::cin, line);  // go
    const long long start = NowNs();
    heartbeats_.Start();
    auto formed = NextRound(false, nodes_);
    PrintJson({{"start_ns", start},
               {"done_ns", formed.second},
               {"joined", formed.first}});
    if (!LoseNode()) return 2;
    int join = -1;
    if (!std::getline(std::cin, line) ||
        std::sscanf(line.c_str(), "join %d", &join) != 1) {
      return 2;
    }
    const int joined = AddNode(join);
    _exit(joined == static_cast<int>(live_.size()) ? 0 : 1);
  }

 private:
  // Simulated node `global`, the `local`th of this process, renewed by
  // heartbeats_ and noting its membership changes in changes_.
  void AddSim(int global, int local) {
    DynamicRendezvousOptions o;
    o.run_id = run_id_;
    o.min_nodes = min_nodes_;
    o.max_nodes = nodes_;
    o.node = absl::StrCat("sim", global);
    o.addr = "127.0.0.1";
    o.config.join_timeout = absl::Seconds(300);
    o.config.keep_alive_interval = keep_alive_;
    o.config.read_timeout = absl::Seconds(300);
    o.config.last_call_timeout = last_call_;
    o.heartbeat_thread = false;
    sims_.push_back(std::make_unique<DynamicRendezvous>(
        o,
        std::make_unique<SharedStore>(clients_[local % clients_.size()].get(),
                                      &requests_, &renewals_)));
    sims_.back()->SetOnMembershipChange(
        [this, local] { changes_.Note(local); });
    heartbeats_.Add(local, sims_.back().get());
  }

  // A phase's requests, lease renewals left out: what its rendezvous cost.
  long PhaseRequests() {
    const long now = requests_.load() - renewals_.load();
    const long n = now - phase_from_;
    phase_from_ = now;
    return n;
  }

  // Every live node takes the next round, as the agent does on a change;
  // with `wait_change`, only once told of one (the new node: at once).
  // A node that got a smaller round (a last call ended before the last
  // node joined) takes the next one when told, until it holds `want`.
  // Returns how many did and when the last one did.
  std::pair<int, long long> NextRound(bool wait_change, int want) {
    std::atomic<int> ok{0};
    std::atomic<long long> last{0};
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    std::vector<std::thread> threads;
    for (int i : live_) {
      threads.emplace_back([&, i] {
        if (wait_change && !changes_.Await(i, deadline)) return;
        for (;;) {
          const int before = changes_.Count(i);
          auto r = sims_[i]->Next(1);
          if (!r.ok()) return;
          if (r->group_world_size >= want) break;
          if (!changes_.AwaitAbove(i, before, deadline)) return;
        }
        ++ok;
        const long long t = NowNs();
        long long seen = last.load();
        while (t > seen && !last.compare_exchange_weak(seen, t)) {
        }
      });
    }
    for (auto& t : threads) t.join();
    return std::make_pair(ok.load(), last.load());
  }

  // The driver's "kill N": this process stops node N if it holds it, and
  // the survivors re-form. False when the line is not that.
  bool LoseNode() {
    std::string line;
    int kill = -1;
    if (!std::getline(std::cin, line) ||
        std::sscanf(line.c_str(), "kill %d", &kill) != 1) {
      return false;
    }
    changes_.NextPhase();
    // Reset, not read: the next phase counts from zero.
    (void)PhaseRequests();
    (void)Tally()->TakeJson();  // likewise
    long long kill_ns = 0;
    if (kill >= first_ && kill < first_ + count_) {
      // Stops its heartbeat and watch without a word to the store. Timed
      // from when its renewals stop: Remove waits out its shard's pass,
      // which may renew this node once more (a pass took up to ~0.4 s
      // under load, and the lease then ran out more than a lease after a
      // stamp taken before it).
      heartbeats_.Remove(kill - first_);
      kill_ns = NowNs();
      sims_[kill - first_].reset();
      live_.erase(std::find(live_.begin(), live_.end(), kill - first_));
    }
    auto recovered = NextRound(true, nodes_ - 1);
    const auto told = changes_.Told();
    PrintJson({{"kill_ns", kill_ns},
               {"done_ns", recovered.second},
               {"joined", recovered.first},
               {"members", live_.size()},
               {"told_first_ns", told.first},
               {"told_last_ns", told.second},
               {"wall_minus_mono_ns", WallNs() - NowNs()},
               {"requests", PhaseRequests()},
               {"by_method", Tally()->TakeJson()}});
    return true;
  }

  // The driver's "join N": the first process hosts the new node N, and
  // every live node takes the grown round. Returns how many did.
  int AddNode(int join) {
    changes_.NextPhase();
    long long join_ns = 0;
    if (first_ == 0) {  // the first process hosts the new node
      AddSim(join, count_);
      join_ns = NowNs();
      changes_.Note(count_);  // no change to wait for: it joins at once
      live_.push_back(count_);
    }
    auto grown = NextRound(true, nodes_);
    PrintJson({{"join_ns", join_ns},
               {"done_ns", grown.second},
               {"joined", grown.first},
               {"members", live_.size()},
               {"requests", PhaseRequests()}});
    return grown.first;
  }

  const std::string run_id_;
  const int nodes_, first_, count_, min_nodes_;
  const absl::Duration last_call_, keep_alive_;
  std::vector<std::unique_ptr<GrpcStoreClient>> clients_;
  std::atomic<long> requests_{0}, renewals_{0};
  long phase_from_ = 0;
  std::vector<std::unique_ptr<DynamicRendezvous>> sims_;
  Heartbeats heartbeats_;
  Changes changes_;
  // The nodes of this process still running, by local index.
  std::vector<int> live_;
};

int Recover(const std::string& endpoint, const std::string& run_id, int nodes,
            int first, int count, int min_nodes, double last_call_s,
            double keep_alive_s) {
  Recovery recovery(endpoint, run_id, nodes, first, count, min_nodes,
                    last_call_s, keep_alive_s);
  return recovery.Run();
}

}  // namespace
}  // namespace distjob

int main(int argc, char** argv) {
  using namespace distjob;
  // As the agent's main: the store measured is the one the agent runs.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // STORE_BENCH_LOG=info: the rendezvous's own log lines on stderr (with
  // their times), for a recovery's timeline.
  LogLevel level = LogLevel::kError;
  if (const char* env = std::getenv("STORE_BENCH_LOG"); env != nullptr) {
    if (auto parsed = ParseLogLevel(env); parsed.ok()) level = *parsed;
  }
  InitLogging(level);
  // As the agent's main: its thousands of connections need the hard limit.
  RaiseOpenFileLimit();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "server") {
    return Server(argc > 2 ? std::atoi(argv[2]) : 1,
                  argc > 3 ? std::atoi(argv[3]) : 0);
  }
  if (mode == "ops" &&
      (argc == 6 || (argc == 7 && argv[6] == std::string("sync")))) {
    return Ops(argv[2], argv[3], std::atoi(argv[4]), std::atof(argv[5]),
               argc == 7);
  }
  if (mode == "scale" && (argc == 8 || argc == 9)) {
    return Scale(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]),
                 std::atoi(argv[6]), std::atof(argv[7]),
                 argc == 9 ? std::atof(argv[8]) : 1.0);
  }
  if (mode == "recover" && (argc == 9 || argc == 10)) {
    return Recover(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]),
                   std::atoi(argv[6]), std::atoi(argv[7]), std::atof(argv[8]),
                   argc == 10 ? std::atof(argv[9]) : 1.0);
  }
  std::fputs(
      "usage: store_bench server [MAX_NODES [QUEUES]] | ops ENDPOINT OP "
      "CLIENTS "
      "SECONDS [sync] | scale ENDPOINT RUN_ID NODES FIRST COUNT HB_SECONDS "
      "[KEEP_S] | "
      "recover ENDPOINT RUN_ID NODES FIRST COUNT MIN LAST_CALL_S [KEEP_S]\n",
      stderr);
  return 2;
}
