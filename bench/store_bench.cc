// Load generator for the store benchmarks in bench/run.py; prints one JSON
// object per measurement on stdout.
//
//   store_bench server
//       hosts the embedded store on 127.0.0.1 (a free port, printed as
//       "port N"), in its own process so its CPU time can be read from
//       /proc; exits at EOF on stdin.
//   store_bench ops ENDPOINT OP CLIENTS SECONDS
//       CLIENTS threads, one gRPC channel each, run OP (get, set, add,
//       compare_set) back to back for SECONDS; ops/s, p50 and p99 latency.
//   store_bench scale ENDPOINT RUN_ID NODES FIRST COUNT HB_SECONDS
//       COUNT simulated nodes (node FIRST.. of NODES) run the real
//       DynamicRendezvous join over a few shared channels, so thousands fit
//       in one process. Waits for a "go" line on stdin, joins, reports when
//       the last of its nodes got the round, then counts the store requests
//       its nodes make in HB_SECONDS of steady state (heartbeats, watches).
//       ENDPOINT etcd:HOST:PORT[,HOST:PORT...] runs the same nodes against
//       an etcd cluster through the agent's etcd client (`--rdzv-backend
//       etcd`) instead of the embedded store.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/store/etcd_store.h"
#include "rendezvous/store/grpc_store_client.h"
#include "rendezvous/store/store_server.h"

namespace distjob {
namespace {

long long NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int Server() {
  auto server = StoreServer::Start("127.0.0.1", 0);
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
        double seconds) {
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
  go = true;
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  std::vector<int64_t> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0
                       : all[static_cast<size_t>(p * (all.size() - 1))] / 1e9;
  };
  std::printf(
      "{\"ops_per_s\": %.1f, \"p50\": %.9f, \"p99\": %.9f, \"n\": %zu, "
      "\"errors\": %d}\n",
      all.size() / seconds, pct(0.5), pct(0.99), all.size(), errors.load());
  return errors > 0 ? 1 : 0;
}

// Forwards to a channel shared by many simulated nodes and counts the
// requests, since the server keeps no per-request statistics.
class SharedStore : public StoreInterface {
 public:
  SharedStore(StoreInterface* s, std::atomic<long>* n) : s_(s), n_(n) {}
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    ++*n_;
    return s_->MultiSet(kvs, ttl);
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override {
    ++*n_;
    return s_->MultiGet(keys, timeout);
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    ++*n_;
    return s_->Add(key, delta);
  }
  absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override {
    ++*n_;
    return s_->CompareSet(key, expected, desired);
  }
  absl::StatusOr<int64_t> Append(const std::string& key,
                                 const std::string& value) override {
    ++*n_;
    return s_->Append(key, value);
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    ++*n_;
    return s_->Check(keys);
  }
  absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override {
    ++*n_;
    return s_->Delete(keys);
  }
  absl::StatusOr<int64_t> NumKeys() override {
    ++*n_;
    return s_->NumKeys();
  }
  absl::StatusOr<StoreListing> ListPage(const std::string& prefix,
                                        const std::string& start_after,
                                        size_t limit) override {
    ++*n_;
    return s_->ListPage(prefix, start_after, limit);
  }
  absl::StatusOr<std::pair<bool, int64_t>> Watch(
      const std::string& prefix, int64_t after_revision,
      absl::Duration timeout) override {
    ++*n_;
    return s_->Watch(prefix, after_revision, timeout);
  }

 private:
  StoreInterface* s_;
  std::atomic<long>* n_;
};

// The store the simulated nodes share: the embedded store's gRPC client,
// or with "etcd:" the agent's etcd client, as `--rdzv-backend etcd` makes it.
absl::StatusOr<std::unique_ptr<StoreInterface>> ScaleClient(
    const std::string& endpoint, const std::string& run_id) {
  absl::string_view etcd = endpoint;
  if (!absl::ConsumePrefix(&etcd, "etcd:")) {
    return std::unique_ptr<StoreInterface>(
        GrpcStoreClient::Connect(endpoint, absl::Seconds(300)));
  }
  auto options =
      ParseEtcdOptions(std::string(etcd), "read_timeout=300", run_id);
  if (!options.ok()) return options.status();
  auto store = EtcdStore::Connect(*std::move(options));
  if (!store.ok()) return store.status();
  return std::unique_ptr<StoreInterface>(*std::move(store));
}

int Scale(const std::string& endpoint, const std::string& run_id, int nodes,
          int first, int count, double hb_seconds) {
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
  for (int i = 0; i < count; ++i) {
    DynamicRendezvousOptions o;
    o.run_id = run_id;
    o.min_nodes = o.max_nodes = nodes;
    o.node = absl::StrCat("sim", first + i);
    o.addr = "127.0.0.1";
    o.config.join_timeout = absl::Seconds(300);
    o.config.keep_alive_interval = absl::Seconds(1);
    o.config.read_timeout = absl::Seconds(300);
    sims.push_back(std::make_unique<DynamicRendezvous>(
        o,
        std::make_unique<SharedStore>(clients[i % channels].get(), &requests)));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
  const long long start = NowNs();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (auto& s : sims) {
    threads.emplace_back([&ok, &s] { ok += s->Next(1).ok() ? 1 : 0; });
  }
  for (auto& t : threads) t.join();
  const long long done = NowNs();
  std::printf(
      "{\"start_ns\": %lld, \"done_ns\": %lld, \"joined\": %d, "
      "\"join_requests\": %ld}\n",
      start, done, ok.load(), requests.load());
  std::fflush(stdout);
  // Steady state: only heartbeats and the watchers they wake.
  absl::SleepFor(absl::Milliseconds(500));
  requests = 0;
  absl::SleepFor(absl::Seconds(hb_seconds));
  std::printf("{\"steady_requests\": %ld}\n", requests.load());
  std::fflush(stdout);
  // The process exits without tearing down thousands of rendezvous: the
  // bench throws the store away anyway.
  _exit(ok == count ? 0 : 1);
}

}  // namespace
}  // namespace distjob

int main(int argc, char** argv) {
  using namespace distjob;
  // As the agent's main: the store measured is the one the agent runs.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  InitLogging(LogLevel::kError);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "server") return Server();
  if (mode == "ops" && argc == 6) {
    return Ops(argv[2], argv[3], std::atoi(argv[4]), std::atof(argv[5]));
  }
  if (mode == "scale" && argc == 8) {
    return Scale(argv[2], argv[3], std::atoi(argv[4]), std::atoi(argv[5]),
                 std::atoi(argv[6]), std::atof(argv[7]));
  }
  std::fputs(
      "usage: store_bench server | ops ENDPOINT OP CLIENTS SECONDS | scale "
      "ENDPOINT RUN_ID NODES FIRST COUNT HB_SECONDS\n",
      stderr);
  return 2;
}
