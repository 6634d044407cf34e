#include "agent/health.h"

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/security_flags.h"
#include "agent/cli/subcommand_flags.h"
#include "agent/exit_codes.h"
#include "common/duration.h"
#include "common/fd_budget.h"
#include "common/grpc_status.h"
#include "common/resolver.h"
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

// Probers hold a connection or two each (the kubelet opens one per probe);
// 64 connections are 128 descriptors (ours and gRPC's).
constexpr size_t kMaxConns = 64;
constexpr size_t kMaxConnsPerPeer = 32;
constexpr absl::Duration kFirstBytesTimeout = absl::Seconds(1);
constexpr int kHandshakeTimeoutMs = 1000;
constexpr absl::Duration kIdleTimeout = absl::Seconds(30);
constexpr int kKeepaliveMs = 30 * 1000;
constexpr int kKeepaliveTimeoutMs = 5 * 1000;
constexpr int kMaxStreams = 16;
constexpr int kMaxMessageBytes = 4096;
// What gRPC's buffers may hold for all 64 connections together: past it
// gRPC shrinks its windows and reads instead of growing (as the store's).
constexpr size_t kGrpcQuotaBytes = size_t{8} << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    int port, const StoreSecurity* tls) {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<HealthServer> health(new HealthServer());
  grpc::ServerBuilder builder;
  static UnimplementedService* const unimplemented = new UnimplementedService;
  builder.RegisterCallbackGenericService(unimplemented);
  // gRPC sets SO_REUSEPORT by default: a second agent on the same port
  // would then share it silently, and probes would reach either agent.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Ours, not gRPC's listener, as the store's: it caps connections.
  ConnLimits limits;
  limits.max_conns = kMaxConns;
  limits.max_conns_per_peer = kMaxConnsPerPeer;
  limits.first_bytes_timeout = kFirstBytesTimeout;
  limits.idle_timeout = kIdleTimeout;
  limits.name = "health server";
  limits.total_cap = "64 connections";
  limits.peer_cap = "32 connections per address";
  limits.fd_user = FdUser::kOther;
  const bool use_tls = tls != nullptr && tls->tls();
  // `::` dual stack as the store, 0.0.0.0 where the pod has no IPv6.
  auto conns = ConnLimiter::Listen("::", port, limits, use_tls);
  if (!conns.ok() && errno == EAFNOSUPPORT) {
    conns = ConnLimiter::Listen("0.0.0.0", port, limits, use_tls);
  }
  if (!conns.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "--health-port ", port, ": ", conns.status().message(),
        "; the port is taken (by another agent or process in this network "
        "namespace?)"));
  }
  health->conns_ = *std::move(conns);
  health->port_ = health->conns_->port();
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreams);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(kIdleTimeout)));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             kHandshakeTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             kKeepaliveTimeoutMs);
  grpc::ResourceQuota quota("distjob-health");
  quota.Resize(kGrpcQuotaBytes);
  builder.SetResourceQuota(quota);
  health->acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      tls != nullptr ? MakeServerCredentials(*tls)
                     : grpc::InsecureServerCredentials());
  health->server_ = builder.BuildAndStart();
  if (health->server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "--health-port ", port, ": cannot start the gRPC health server"));
  }
  health->conns_->Start([acceptor = health->acceptor_.get()](int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.fd = fd;
    acceptor->HandleNewConnection(&p);
  });
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
  conns_->Stop();
  server_.reset();
}

absl::StatusOr<std::string> CheckHealth(const std::string& host, int port,
                                        const std::string& service,
                                        absl::Duration timeout,
                                        const StoreSecurity* tls) {
  // The agent's resolver, not gRPC's (common/resolver.h): the look-up and
  // the call share the probe's one timeout.
  const absl::Time deadline = absl::Now() + timeout;
  auto target = ResolveGrpcTarget(host, port, timeout);
  if (!target.ok()) return target.status();
  grpc::ChannelArguments args;
  // A health answer is a few bytes: a server that sends more is refused.
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target->authority);
  if (tls != nullptr && tls->tls() && tls->server_name.empty()) {
    args.SetSslTargetNameOverride(target->host);
  }
  auto channel = grpc::CreateCustomChannel(
      target->target,
      tls != nullptr ? MakeChannelCredentials(*tls, &args)
                     : grpc::InsecureChannelCredentials(),
      args);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return "NOT_FOUND";
  if (!status.ok()) {
    return FromGrpcStatus(status, absl::StrCat(host, ":", port));
  }
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

namespace {

// What `health` probes, and how.
struct HealthProbe {
  int port = -1;
  std::string service;
  std::string host = "127.0.0.1";
  absl::Duration timeout = absl::Seconds(1);
  bool use_tls = false;
  StoreSecurityOptions tls_files;
};

// No environment defaults for what a probe checks (port, service, host);
// only the TLS files come from the DISTJOB_RDZV_TLS_* the pod has.
void AddProbeFlags(FlagSet* flags, HealthProbe* probe) {
  auto flag = [flags](const char* name, const char* metavar, const char* help,
                      FlagSetter set) {
    Flag f;
    f.names = {name};
    f.metavar = metavar;
    f.help = help;
    f.set = std::move(set);
    flags->Add(std::move(f));
  };
  flag("port", "N", "The agent's --health-port (required).",
       SetInt(&probe->port, 1, 65535));
  flag("service", "S", "liveness, readiness or \"\" (default: overall).",
       SetString(&probe->service));
  flag("host", "H", "Where the agent runs (default 127.0.0.1).",
       SetString(&probe->host));
  flag("timeout", "SECONDS", "How long to wait for the answer (default 1).",
       [timeout = &probe->timeout](absl::string_view v, absl::string_view) {
         auto d = ParseDuration(v, "value");
         if (!d.ok()) return d.status();
         if (*d <= absl::ZeroDuration()) {
           return absl::InvalidArgumentError(
               absl::StrCat("'", v, "' is not a positive number of seconds"));
         }
         *timeout = *d;
         return absl::OkStatus();
       });
  Flag tls_flag;
  tls_flag.names = {"tls"};
  tls_flag.is_bool = true;
  tls_flag.help =
      "Speak TLS to an agent run with --health-tls, with the certificate "
      "files below (defaults: the agent's DISTJOB_RDZV_TLS_* variables).";
  tls_flag.set = SetBool(&probe->use_tls);
  flags->Add(std::move(tls_flag));
  AddTlsFlags(flags, &probe->tls_files);
}

// The certificate files --tls speaks with.
absl::StatusOr<StoreSecurity> LoadProbeTls(const HealthProbe& probe) {
  auto loaded = LoadStoreSecurity(probe.tls_files);
  if (loaded.ok() && !loaded->tls()) {
    return absl::InvalidArgumentError(
        "--tls needs --rdzv-tls-cert and --rdzv-tls-key");
  }
  return loaded;
}

}  // namespace

int HealthCommand(const std::vector<std::string>& args, const EnvMap& env) {
  HealthProbe probe;
  FlagSet flags(
      "Usage: distjob-agent health --port N [--service S] [--host H] "
      "[--timeout SECONDS] [--tls]\n\n"
      "One grpc.health.v1 Check against a running agent's --health-port.\n"
      "Prints the serving status; exits 0 when SERVING, 1 otherwise.");
  AddProbeFlags(&flags, &probe);
  std::vector<std::string> positional;
  if (auto done =
          ParseSubcommandFlags("health", flags, args, env, 0, &positional)) {
    return *done;
  }
  std::optional<StoreSecurity> tls;
  if (probe.use_tls) {
    auto loaded = LoadProbeTls(probe);
    if (!loaded.ok()) {
      std::fprintf(stderr, "distjob-agent health: %s\n",
                   std::string(loaded.status().message()).c_str());
      return kExitUsage;
    }
    tls = *std::move(loaded);
  }
  if (probe.port < 0) {
    std::fprintf(stderr,
                 "distjob-agent health: --port is required; see --help\n");
    return kExitUsage;
  }
  auto status = CheckHealth(probe.host, probe.port, probe.service,
                            probe.timeout, tls ? &*tls : nullptr);
  if (!status.ok()) {
    std::fprintf(stderr, "distjob-agent health: %s (%s)\n",
                 std::string(status.status().message()).c_str(),
                 absl::StatusCodeToString(status.status().code()).c_str());
    return kExitCheckFailed;
  }
  std::printf("%s\n", status->c_str());
  return *status == "SERVING" ? kExitSuccess : kExitCheckFailed;
}

}  // namespace distjob
