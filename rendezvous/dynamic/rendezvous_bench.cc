// Microbenchmark of the embedded store and the elastic rendezvous, in one
// process over real gRPC on loopback, with [max_nodes] [seconds] as its
// arguments:
//   bazel run -c opt //rendezvous/dynamic:rendezvous_bench -- 64 2
// Prints store operations per second (set, get, add, compare-set) and the
// time N agents take to form one round, for N = 2, 4, ... max_nodes.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/fd_budget.h"
#include "common/logging.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/store/grpc_store_client.h"
#include "rendezvous/store/server/store_server.h"

namespace distjob {
namespace {

void BenchOps(const std::string& endpoint, double seconds) {
  const int threads = 8;
  for (const char* op : {"set", "get", "add", "compare_set"}) {
    std::atomic<long> count{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto c = GrpcStoreClient::Connect(endpoint, absl::Seconds(10));
        const std::string key = absl::StrCat("bench/", t);
        // Calls timed, not checked: a failed one is as fast or slower.
        (void)c->Set(key, "1");
        long n = 0;
        while (!stop) {
          const std::string o = op;
          // Each result is discarded, as above: timed, not checked.
          if (o == "set") {
            (void)c->Set(key, "value");  // as above
          } else if (o == "get") {
            (void)c->Get(key, absl::ZeroDuration());  // as above
          } else if (o == "add") {
            (void)c->Add(key + "/n", 1);  // as above
          } else {
            (void)c->CompareSet(key + "/c", "", "x");  // as above
          }
          ++n;
        }
        count += n;
      });
    }
    absl::SleepFor(absl::Seconds(seconds));
    stop = true;
    for (auto& t : pool) t.join();
    std::printf("store %-12s %10.0f ops/s (%d client threads)\n", op,
                count / seconds, threads);
  }
}

void BenchRendezvous(const std::string& endpoint, int nodes, int round) {
  std::vector<std::unique_ptr<DynamicRendezvous>> agents;
  for (int i = 0; i < nodes; ++i) {
    DynamicRendezvousOptions o;
    o.run_id = absl::StrCat("bench-", round);
    o.min_nodes = o.max_nodes = nodes;
    o.node = absl::StrCat("node", i);
    o.addr = "127.0.0.1";
    agents.push_back(std::make_unique<DynamicRendezvous>(
        o, GrpcStoreClient::Connect(endpoint, absl::Seconds(10))));
  }
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (auto& a : agents) {
    threads.emplace_back([&] { ok += a->Next(1).ok() ? 1 : 0; });
  }
  for (auto& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;
  std::printf("rendezvous N=%-3d %8.1f ms (%d/%d joined)\n", nodes,
              absl::ToDoubleMilliseconds(took), ok.load(), nodes);
  for (auto& a : agents) a->Shutdown(false);
}

}  // namespace
}  // namespace distjob

int main(int argc, char** argv) {
  using namespace distjob;
  InitLogging(LogLevel::kError);
  RaiseOpenFileLimit();  // as the agent's main, before the store listens
  const int max_nodes = argc > 1 ? std::atoi(argv[1]) : 64;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2;
  auto server = StoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string endpoint = absl::StrCat("127.0.0.1:", (*server)->port());
  BenchOps(endpoint, seconds);
  int round = 0;
  for (int n = 2; n <= max_nodes; n *= 2) BenchRendezvous(endpoint, n, round++);
  return 0;
}
