// The workers' TCPStore served by the agent (torchrun 2.x's shared store,
// TORCHELASTIC_USE_AGENT_STORE=True): the rendezvous starts it on group
// rank 0 and stops it elsewhere (WorkerStoreHost); the agent owns it, so it
// outlives worker restarts and rounds, and /metrics reads its stats.
#ifndef DISTJOB_AGENT_WORKER_STORE_H_
#define DISTJOB_AGENT_WORKER_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/resolver.h"
#include "rendezvous/rendezvous.h"
#include "workerstore/tcpstore_server.h"

namespace distjob {

class WorkerStore : public WorkerStoreHost {
 public:
  // One pass over many names, all at once (common/resolver's ResolveNames,
  // as DNS discovery's passes): each name's addresses, none when it did
  // not resolve before the pass ended.
  using Resolve = std::function<absl::StatusOr<Addresses>(
      const std::vector<std::string>& names, const ResolverOptions& options)>;
  using Clock = absl::Time (*)();

  // `restrict_peers`: the job has a rendezvous token, so only loopback and
  // the round's members may connect. `connections`: the clients the job's
  // declared size brings (agent/fd_needs.h), which the server's caps grow
  // to admit (TcpStoreServerOptions::expected_connections). `resolve` unset:
  // ResolveNames; `clock` unset: absl::Now (it bounds AllowMembers' pass).
  explicit WorkerStore(bool restrict_peers, size_t connections = 0,
                       Resolve resolve = nullptr, Clock clock = nullptr);
  ~WorkerStore() override;

  absl::StatusOr<int> Serve(const std::string& host, int port) override;
  void Stop() override;
  absl::Status AllowMembers(const std::vector<std::string>& addrs,
                            absl::Duration timeout,
                            const std::function<bool()>& cancelled,
                            MemberAdmission* admission) override;
  absl::Status Clear() override;

  // nullopt while not serving.
  std::optional<TcpStoreStats> Stats();
  // The addresses admitted now; empty when anyone may connect.
  std::vector<std::string> AllowedPeers();

 private:
  const bool restrict_peers_;
  const size_t connections_;
  const Resolve resolve_;
  const Clock clock_;
  absl::Mutex mu_;
  std::unique_ptr<TcpStoreServer> server_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> allowed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_WORKER_STORE_H_
