// The agent's probes over the standard gRPC health protocol
// (grpc.health.v1.Health/Check), so Kubernetes gRPC probes work as is:
//   "liveness"   SERVING while the agent's loop is alive
//   "readiness"  SERVING only while the workers run
//   ""           the overall state (the same as liveness)
// Any other service answers NOT_FOUND. The server runs on gRPC's own
// threads, so a probe is answered however busy the supervision loop is.
// Its connections are capped (rendezvous/store/server/conn_limiter.h: per peer
// address, and in all with the heaviest address's oldest evicted), a
// connection must send its first bytes and finish its handshake within a
// second, and idle or silent ones are closed: a flood from the network
// neither starves the kubelet's probe nor uses up the agent's descriptors.
#ifndef DISTJOB_AGENT_HEALTH_H_
#define DISTJOB_AGENT_HEALTH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/environment.h"
#include "rendezvous/store/server/conn_limiter.h"
#include "rendezvous/store/store_credentials.h"

namespace grpc {
class Server;
namespace experimental {
class ExternalConnectionAcceptor;
}
}  // namespace grpc

namespace distjob {

class HealthServer {
 public:
  // On all interfaces, `port` numeric (0 picks a free one); plaintext, or
  // TLS with `tls`'s certificate (mutual when it has a CA) when `tls` is
  // given, for probes that are not the kubelet's own.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      int port, const StoreSecurity* tls = nullptr);
  ~HealthServer();

  int port() const { return port_; }
  void SetLive(bool live);
  void SetReady(bool ready);
  void Shutdown();

 private:
  HealthServer() = default;
  std::unique_ptr<ConnLimiter> conns_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// The `health` subcommand (`args` after the command): one Check against
// 127.0.0.1:port. Returns 0 when SERVING, 1 otherwise (NOT_SERVING,
// NOT_FOUND, unreachable), for exec probes on clusters without gRPC
// probes; 2 for a command line that does not parse.
int HealthCommand(const std::vector<std::string>& args, const EnvMap& env);

// Check `service` on host:port; the status name ("SERVING", "NOT_SERVING",
// "NOT_FOUND", ...) or an error.
// Over TLS when `tls` is given.
absl::StatusOr<std::string> CheckHealth(const std::string& host, int port,
                                        const std::string& service,
                                        absl::Duration timeout,
                                        const StoreSecurity* tls = nullptr);

}  // namespace distjob

#endif  // DISTJOB_AGENT_HEALTH_H_
