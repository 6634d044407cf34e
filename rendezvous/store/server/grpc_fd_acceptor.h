// A gRPC server behind a ConnLimiter (conn_limiter.h): the limiter accepts
// and counts the connections, and this hands each accepted socket to gRPC.
// The rendezvous store and the spawn server are built this way.
#ifndef DISTJOB_RENDEZVOUS_STORE_SERVER_GRPC_FD_ACCEPTOR_H_
#define DISTJOB_RENDEZVOUS_STORE_SERVER_GRPC_FD_ACCEPTOR_H_

#include <functional>
#include <memory>

#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace distjob {

class GrpcFdAcceptor {
 public:
  // Registers the acceptor with `builder`, before it builds the server;
  // `credentials` secure each connection (store_credentials.h).
  GrpcFdAcceptor(grpc::ServerBuilder& builder,
                 std::shared_ptr<grpc::ServerCredentials> credentials);

  // What ConnLimiter::Start hands each accepted socket to, once the server
  // is built; usable while this lives.
  std::function<void(int fd)> Handoff();

 private:
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_SERVER_GRPC_FD_ACCEPTOR_H_
