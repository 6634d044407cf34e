#include "agent/worker_store.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"

namespace distjob {

WorkerStore::WorkerStore(bool restrict_peers, size_t connections,
                         Resolve resolve, Clock clock)
    : restrict_peers_(restrict_peers),
      connections_(connections),
      resolve_(resolve ? std::move(resolve) : ResolveNames),
      clock_(clock != nullptr ? clock : absl::Now) {
  if (restrict_peers_) allowed_ = {"127.0.0.1", "::1"};
}

WorkerStore::~WorkerStore() { Stop(); }

absl::StatusOr<int> WorkerStore::Serve(const std::string& host, int port) {
  absl::MutexLock lock(&mu_);
  if (server_ != nullptr) return server_->port();
  TcpStoreServerOptions options;
  options.expected_connections = connections_;
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

absl::Status WorkerStore::Clear() {
  // Under mu_ so that Stop() cannot free the server meanwhile; Clear()
  // returns within one pass of the server's loop, or within its bound.
  absl::MutexLock lock(&mu_);
  return server_ != nullptr ? server_->Clear() : absl::OkStatus();
}

absl::Status WorkerStore::AllowMembers(const std::vector<std::string>& addrs,
                                       absl::Duration timeout,
                                       const std::function<bool()>& cancelled,
                                       MemberAdmission* admission) {
  *admission = MemberAdmission();
  if (!restrict_peers_) return absl::OkStatus();
  admission->members_only = true;
  const absl::Time deadline = clock_() + timeout;
  bool was_cancelled = false;
  ResolverOptions options;
  options.pass_timeout = timeout;
  // Polled by the pass (at least every 100 ms): the clock's deadline as
  // well as pass_timeout, so that an injected clock bounds it in tests.
  options.cancelled = [&]() {
    if (cancelled && cancelled()) was_cancelled = true;
    return was_cancelled || clock_() >= deadline;
  };
  // Resolved outside the lock: a scrape must not wait for DNS.
  auto resolved = resolve_(addrs, options);
  if (was_cancelled || (cancelled && cancelled())) {
    return absl::CancelledError(
        "stopped while resolving the round's members for the workers' store");
  }
  if (!resolved.ok()) return resolved.status();
  std::set<std::string> ips = {"127.0.0.1", "::1"};
  for (const auto& [addr, resolved_ips] : *resolved) {
    if (resolved_ips.empty()) {
      admission->unresolved.push_back(addr);
      continue;
    }
    ++admission->admitted;
    ips.insert(resolved_ips.begin(), resolved_ips.end());
  }
  if (!admission->unresolved.empty()) {
    // One line whatever the job's size.
    const std::string warning =
        absl::StrCat("worker store: ", admission->unresolved.size(),
                     " member(s) not admitted this round, no address within "
                     "worker_store_resolve_timeout (first: ",
                     admission->unresolved.front(), ")");
    DJ_LOG_WARNING("{}", warning);
  }
  absl::MutexLock lock(&mu_);
  allowed_.assign(ips.begin(), ips.end());
  if (server_ != nullptr) server_->SetAllowedPeers(allowed_);
  return absl::OkStatus();
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
