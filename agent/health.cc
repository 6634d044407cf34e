#include "agent/health.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/health.grpc.pb.h"

namespace distjob {

namespace {

// The server refuses to start with only the default health service (no
// polled completion queue); a callback service that answers UNIMPLEMENTED
// to every other method gives it one.
class UnimplementedService : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "")); }
      void OnDone() override { delete this; }
    };
    return new Reactor();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(int port) {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<HealthServer> health(new HealthServer());
  grpc::ServerBuilder builder;
  static UnimplementedService* const unimplemented = new UnimplementedService;
  builder.RegisterCallbackGenericService(unimplemented);
  builder.AddListeningPort(absl::StrCat("0.0.0.0:", port),
                           grpc::InsecureServerCredentials(), &health->port_);
  health->server_ = builder.BuildAndStart();
  if (health->server_ == nullptr || health->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health-port: cannot listen on 0.0.0.0:", port));
  }
  health->SetLive(true);
  health->SetReady(false);
  return health;
}

HealthServer::~HealthServer() { Shutdown(); }

void HealthServer::SetLive(bool live) {
  if (server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* service = server_->GetHealthCheckService();
  service->SetServingStatus("liveness", live);
  service->SetServingStatus("", live);
}

void HealthServer::SetReady(bool ready) {
  if (server_ == nullptr) return;
  server_->GetHealthCheckService()->SetServingStatus("readiness", ready);
}

void HealthServer::Shutdown() {
  if (server_ == nullptr) return;
  // Probes during the final moments see NOT_SERVING, not a refused port.
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(500));
  server_.reset();
}

absl::StatusOr<std::string> CheckHealth(const std::string& host, int port,
                                        const std::string& service,
                                        absl::Duration timeout) {
  auto channel = grpc::CreateChannel(absl::StrCat(host, ":", port),
                                     grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(timeout));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return "NOT_FOUND";
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat(host, ":", port, ": ", status.error_message(), " (code ",
                     static_cast<int>(status.error_code()), ")"));
  }
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

int HealthMain(int argc, char** argv) {
  int port = -1;
  std::string service;
  std::string host = "127.0.0.1";
  double timeout_s = 1.0;
  const char* kUsage =
      "Usage: distjob-agent health --port N [--service S] [--host H] "
      "[--timeout SECONDS]\n"
      "Exits 0 when the agent reports SERVING, 1 otherwise.\n";
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "distjob-agent health: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--port") {
      if ((v = value("--port")) == nullptr) return 2;
      if (!absl::SimpleAtoi(v, &port) || port < 1 || port > 65535) {
        std::fprintf(stderr,
                     "distjob-agent health: --port: '%s' is not a port "
                     "1-65535\n",
                     v);
        return 2;
      }
    } else if (a == "--service") {
      if ((v = value("--service")) == nullptr) return 2;
      service = v;
    } else if (a == "--host") {
      if ((v = value("--host")) == nullptr) return 2;
      host = v;
    } else if (a == "--timeout") {
      if ((v = value("--timeout")) == nullptr) return 2;
      if (!absl::SimpleAtod(v, &timeout_s) || timeout_s <= 0) {
        std::fprintf(stderr,
                     "distjob-agent health: --timeout: '%s' is not a "
                     "positive number of seconds\n",
                     v);
        return 2;
      }
    } else {
      std::fprintf(stderr, "distjob-agent health: unknown argument '%s'\n%s",
                   a.c_str(), kUsage);
      return 2;
    }
  }
  if (port < 0) {
    std::fprintf(stderr, "distjob-agent health: --port is required\n%s",
                 kUsage);
    return 2;
  }
  auto status = CheckHealth(host, port, service, absl::Seconds(timeout_s));
  if (!status.ok()) {
    std::fprintf(stderr, "distjob-agent health: %s\n",
                 std::string(status.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", status->c_str());
  return *status == "SERVING" ? 0 : 1;
}

}  // namespace distjob
