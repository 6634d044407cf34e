#include "rendezvous/store/server/grpc_fd_acceptor.h"

#include <utility>

namespace distjob {

GrpcFdAcceptor::GrpcFdAcceptor(
    grpc::ServerBuilder& builder,
    std::shared_ptr<grpc::ServerCredentials> credentials)
    : acceptor_(builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::
              FROM_FD,
          std::move(credentials))) {}

std::function<void(int fd)> GrpcFdAcceptor::Handoff() {
  return [acceptor = acceptor_.get()](int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.fd = fd;
    acceptor->HandleNewConnection(&p);
  };
}

}  // namespace distjob
