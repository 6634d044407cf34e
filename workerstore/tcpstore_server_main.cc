// A TCPStore-protocol server on its own, for the integration test
// (tests/integration/test_tcpstore_server.py): prints "port N" once it
// listens; each "stats" line on stdin is answered with one line of stats;
// serves until SIGTERM or the end of stdin.
//
//   tcpstore_server_main [--host H] [--port N] [--max-value-bytes N]
//       [--max-frame-bytes N] [--max-waiters-per-peer N]
//       [--max-connections-per-peer N] [--set-stream-pause-us N]
//       [--max-waiters N] [--max-waiter-bytes N] [--max-connections N]
//       [--max-buffered-bytes N]
//       [--allow IP]...
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/fd_budget.h"
#include "common/json.h"
#include "common/logging.h"
#include "workerstore/tcpstore_server.h"

namespace {

// One line of JSON on stdout.
void PrintStats(const distjob::TcpStoreStats& s) {
  distjob::Json requests = distjob::Json::object();
  for (const auto& [op, n] : s.requests) requests[op] = n;
  const distjob::Json stats = {{"keys", s.keys},
                               {"bytes", s.bytes},
                               {"clients", s.clients},
                               {"parked_waits", s.parked_waits},
                               {"protocol_errors", s.protocol_errors},
                               {"refused_connections", s.refused_connections},
                               {"evictions", s.evictions},
                               {"buffered_bytes", s.buffered_bytes},
                               {"accept_pauses", s.accept_pauses},
                               {"sleeps", s.sleeps},
                               {"stream_pauses", s.stream_pauses},
                               {"requests", std::move(requests)}};
  std::printf("%s\n", distjob::DumpJson(stats).c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  distjob::InitLogging(distjob::LogLevel::kInfo);
  // As the agent's main: the hard limit in force before the server
  // listens, for the benchmarks' thousands of connections.
  distjob::RaiseOpenFileLimit();
  distjob::TcpStoreServerOptions options;
  std::vector<std::string> allowed;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    const size_t n = std::strtoull(value.c_str(), nullptr, 10);
    if (flag == "--host") {
      options.host = value;
    } else if (flag == "--port") {
      options.port = static_cast<int>(n);
    } else if (flag == "--max-value-bytes") {
      options.limits.max_value_bytes = n;
    } else if (flag == "--max-frame-bytes") {
      options.max_frame_bytes = n;
    } else if (flag == "--max-waiters-per-peer") {
      options.limits.max_waiters_per_peer = n;
    } else if (flag == "--max-waiters") {
      options.limits.max_waiters = n;
    } else if (flag == "--max-waiter-bytes") {
      options.limits.max_waiter_bytes = n;
    } else if (flag == "--max-connections") {
      options.max_connections = n;
    } else if (flag == "--max-buffered-bytes") {
      options.max_buffered_bytes = n;
    } else if (flag == "--max-connections-per-peer") {
      options.max_connections_per_peer = n;
    } else if (flag == "--set-stream-pause-us") {
      options.set_stream_pause = absl::Microseconds(n);
    } else if (flag == "--allow") {
      allowed.push_back(value);
    } else {
      std::fprintf(stderr, "tcpstore_server_main: unknown flag %s\n",
                   flag.c_str());
      return 2;
    }
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  auto server = distjob::TcpStoreServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!allowed.empty()) (*server)->SetAllowedPeers(allowed);
  std::printf("port %d\n", (*server)->port());
  std::fflush(stdout);
  // Stats on request; the end of stdin stops the server.
  std::thread input([&server] {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line == "stats") PrintStats((*server)->Stats());
    }
    kill(getpid(), SIGTERM);
  });
  input.detach();
  int sig = 0;
  sigwait(&stop, &sig);
  (*server)->Shutdown();
  std::_Exit(0);
}
