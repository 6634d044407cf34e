// What the DynamicRendezvous tests share: a node's options with the short
// intervals that keep the tests fast.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_DYNAMIC_RENDEZVOUS_TESTING_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_DYNAMIC_RENDEZVOUS_TESTING_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/store/store_core.h"

namespace distjob {

// Node `i` ("n<i>") of job "job" with `min`..`max` nodes; keep-alives every
// 100 ms (3 missed: gone), last call 300 ms, join timeout 20 s.
inline DynamicRendezvousOptions Options(int i, int min, int max) {
  DynamicRendezvousOptions o;
  o.run_id = "job";
  o.min_nodes = min;
  o.max_nodes = max;
  o.node = "n" + std::to_string(i);
  o.addr = "127.0.0.1";
  o.config.keep_alive_interval = absl::Milliseconds(100);
  o.config.keep_alive_max_attempt = 3;
  o.config.last_call_timeout = absl::Milliseconds(300);
  o.config.join_timeout = absl::Seconds(20);
  return o;
}

using Nodes = std::vector<std::unique_ptr<DynamicRendezvous>>;

// Nodes n0..n<count-1> of one `min`:`max` job over one in-process store.
inline Nodes MakeNodes(StoreCore* core, int count, int min, int max) {
  Nodes nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back(std::make_unique<DynamicRendezvous>(
        Options(i, min, max), std::make_unique<LocalStore>(core)));
  }
  return nodes;
}

// Calls Next on every node at once, as their agents would (a null node is
// one that died); the results in node order.
inline std::vector<RendezvousResult> FormRound(Nodes& nodes, int nproc = 1) {
  std::vector<RendezvousResult> results(nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == nullptr) continue;
    threads.emplace_back([&, i] {
      auto r = nodes[i]->Next(nproc);
      EXPECT_TRUE(r.ok()) << "n" << i << ": " << r.status();
      if (r.ok()) results[i] = *r;
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_DYNAMIC_RENDEZVOUS_TESTING_H_
