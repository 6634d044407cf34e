#include "rendezvous/store/tcpstore_server.h"

#include "absl/status/status.h"

namespace distjob {

class TcpStoreServer::Impl {};

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions&) {
  return absl::UnimplementedError("TcpStoreServer: not implemented yet");
}
int TcpStoreServer::port() const { return 0; }
void TcpStoreServer::Shutdown() {}
TcpStoreStats TcpStoreServer::Stats() { return {}; }
void TcpStoreServer::SetAllowedPeers(std::vector<std::string>) {}

}  // namespace distjob
