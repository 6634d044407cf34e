// The worker pod's spawn service: `distjob-agent rsh` on the launcher (as
// mpirun's remote launcher) asks it to run a command, and it runs it as
// sshd would, minus sshd: `/bin/sh -c COMMAND` as a supervised child whose
// process group ends with the call. It executes commands for whoever it
// admits, so it only starts with the job's token or mutual TLS.
#ifndef DISTJOB_SPAWN_SPAWN_SERVER_H_
#define DISTJOB_SPAWN_SPAWN_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/environment.h"
#include "rendezvous/store/store_credentials.h"
#include "spawn/spawn_limits.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace distjob {

class ConnLimiter;
class GrpcFdAcceptor;

// The launcher's EndJob: the job's exit code, why, and who said so.
struct JobEnd {
  int exit_code = 0;
  std::string reason;
  std::string caller;  // the peer, as gRPC names it
};

class SpawnServer {
 public:
  // Listens on host:port (0 picks one). FailedPrecondition when `security`
  // has neither a token nor TLS with a client CA (mutual TLS): an open
  // spawn service would run anyone's commands. Commands get `env`.
  static absl::StatusOr<std::unique_ptr<SpawnServer>> Start(
      const std::string& host, int port, const StoreSecurity& security,
      const EnvMap& env, SpawnLimits limits = SpawnLimits());
  ~SpawnServer();

  int port() const { return port_; }
  // The first EndJob a caller with the job's credentials sent, if any.
  std::optional<JobEnd> job_end() const;
  // Stops accepting, cancels the calls in flight (ending their commands'
  // groups) and waits for them.
  void Shutdown();

 private:
  class Service;
  SpawnServer();
  std::unique_ptr<Service> service_;
  std::unique_ptr<ConnLimiter> conns_;
  std::unique_ptr<GrpcFdAcceptor> acceptor_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Whether `security` is enough to serve spawns: a token, or TLS that
// requires client certificates.
bool SpawnSecurityIsEnough(const StoreSecurity& security);

}  // namespace distjob

#endif  // DISTJOB_SPAWN_SPAWN_SERVER_H_
