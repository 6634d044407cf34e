#include "agent/worker_store.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"

namespace distjob {

WorkerStore::WorkerStore(bool restrict_peers, Resolve resolve)
    : restrict_peers_(restrict_peers),
      resolve_(resolve ? std::move(resolve) : [](const std::string& host) {
        return ResolveHost(host);
      }) {
  if (restrict_peers_) allowed_ = {"127.0.0.1", "::1"};
}

WorkerStore::~WorkerStore() { Stop(); }

absl::StatusOr<int> WorkerStore::Serve(const std::string& host, int port) {
  absl::MutexLock lock(&mu_);
  if (server_ != nullptr) return server_->port();
  TcpStoreServerOptions options;
  // A name may not resolve inside a static binary, and the workers reach
  // it by whatever address it has: every interface then.
  options.host = IsIpLiteral(host) ? host : "::";
  options.port = port;
  if (restrict_peers_) {
    options.allowed_peers.assign(allowed_.begin(), allowed_.end());
  }
  auto started = TcpStoreServer::Start(options);
  if (!started.ok()) return started.status();
  server_ = *std::move(started);
  const std::string line =
      JoinHostPort(options.host, server_->port()) +
      (restrict_peers_ ? " (round members and loopback only)" : "");
  DJ_LOG_INFO("serving the workers' TCPStore on {}", line);
  return server_->port();
}

void WorkerStore::Stop() {
  std::unique_ptr<TcpStoreServer> server;
  {
    absl::MutexLock lock(&mu_);
    server = std::move(server_);
  }
  if (server == nullptr) return;
  server->Shutdown();
  DJ_LOG_INFO("stopped serving the workers' TCPStore");
}

void WorkerStore::Clear() {
  // Under mu_ so that Stop() cannot free the server meanwhile; Clear()
  // returns within one pass of the server's loop, or at its Shutdown.
  absl::MutexLock lock(&mu_);
  if (server_ != nullptr) server_->Clear();
}

void WorkerStore::AllowMembers(const std::vector<std::string>& addrs) {
  if (!restrict_peers_) return;
  // Resolved outside the lock: a scrape must not wait for DNS.
  std::set<std::string> ips = {"127.0.0.1", "::1"};
  for (const std::string& addr : addrs) {
    auto resolved = resolve_(addr);
    if (!resolved.ok()) {
      // One preformatted string: a new argument-type combination would
      // instantiate more of fmt in this size-limited binary.
      const std::string warning =
          absl::StrCat("worker store: member ", addr,
                       " not admitted: ", resolved.status().message());
      DJ_LOG_WARNING("{}", warning);
      continue;
    }
    ips.insert(resolved->begin(), resolved->end());
  }
  absl::MutexLock lock(&mu_);
  allowed_.assign(ips.begin(), ips.end());
  if (server_ != nullptr) server_->SetAllowedPeers(allowed_);
}

std::optional<TcpStoreStats> WorkerStore::Stats() {
  absl::MutexLock lock(&mu_);
  if (server_ == nullptr) return std::nullopt;
  return server_->Stats();
}

std::vector<std::string> WorkerStore::AllowedPeers() {
  absl::MutexLock lock(&mu_);
  return allowed_;
}

}  // namespace distjob
