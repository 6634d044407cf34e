#include "spawn/spawn_server.h"

#include <atomic>
#include <csignal>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log_rate_limiter.h"
#include "common/logging.h"
#include "common/text.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/spawn.grpc.pb.h"
#include "rendezvous/store/server/conn_limiter.h"
#include "rendezvous/store/server/grpc_fd_acceptor.h"
#include "spawn/spawn_call.h"
#include "spawn/spawned_command.h"

namespace distjob {
namespace {

constexpr int kKeepaliveMs = 10 * 1000;
constexpr int kKeepaliveTimeoutMs = 5 * 1000;
// An EndJob's reason, as kept for the log and the report.
constexpr size_t kMaxReasonBytes = 512;

}  // namespace

bool SpawnSecurityIsEnough(const StoreSecurity& security) {
  return !security.token.empty() ||
         (security.tls() && !security.ca_pem.empty());
}

class SpawnServer::Service final : public spawn::Spawner::Service {
 public:
  Service(std::string token, EnvMap env, SpawnLimits limits)
      : token_(std::move(token)), env_(std::move(env)), limits_(limits) {}

  grpc::Status Spawn(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<spawn::SpawnReply, spawn::SpawnRequest>* stream)
      override {
    // The token first: a call without it runs, reads and counts nothing.
    const absl::Status auth =
        CheckCallToken(ctx->client_metadata(), token_, "this spawn server");
    if (!auth.ok()) {
      Refused("a call", ctx->peer(), auth.message());
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          std::string(auth.message()));
    }
    if (active_.fetch_add(1) >= limits_.max_spawns) {
      active_.fetch_sub(1);
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("this spawn server runs ", limits_.max_spawns,
                       " commands already"));
    }
    GrpcSpawnCallContext call(ctx);
    grpc::Status s = ServeSpawnCall(&call, stream, SpawnedCommand::StartCommand,
                                    env_, limits_);
    active_.fetch_sub(1);
    return s;
  }

  grpc::Status EndJob(grpc::ServerContext* ctx,
                      const spawn::EndJobRequest* request,
                      spawn::EndJobReply* /*reply*/) override {
    const absl::Status auth =
        CheckCallToken(ctx->client_metadata(), token_, "this spawn server");
    if (!auth.ok()) {
      Refused("an end of the job", ctx->peer(), auth.message());
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          std::string(auth.message()));
    }
    if (request->exit_code() < 0 || request->exit_code() > 255) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("exit code ", request->exit_code(), " is not 0-255"));
    }
    absl::MutexLock lock(&end_mu_);
    if (!end_.has_value()) {
      end_ = JobEnd{request->exit_code(),
                    OneLine(request->reason(), kMaxReasonBytes), ctx->peer()};
    }
    return grpc::Status::OK;
  }

  std::optional<JobEnd> job_end() const {
    absl::MutexLock lock(&end_mu_);
    return end_;
  }

 private:
  const std::string token_;
  const EnvMap env_;
  const SpawnLimits limits_;
  std::atomic<int> active_{0};
  // One line a second per kind of refusal: a peer without the token
  // must not be able to flood the log.
  void Refused(absl::string_view what, const std::string& peer,
               absl::string_view why) {
    absl::MutexLock lock(&warn_mu_);
    refusals_.Warn(LogRateLimiter::Shape(absl::StrCat(what, why)),
                   absl::StrCat("refused ", what, " from ", peer, ": ", why));
  }

  absl::Mutex warn_mu_;
  RateLimitedWarnings refusals_ ABSL_GUARDED_BY(warn_mu_){"spawn"};
  mutable absl::Mutex end_mu_;
  std::optional<JobEnd> end_ ABSL_GUARDED_BY(end_mu_);
};

SpawnServer::SpawnServer() = default;
SpawnServer::~SpawnServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<SpawnServer>> SpawnServer::Start(
    const std::string& host, int port, const StoreSecurity& security,
    const EnvMap& env, SpawnLimits limits) {
  if (!SpawnSecurityIsEnough(security)) {
    return absl::FailedPreconditionError(
        "the spawn server runs commands for its callers: it needs the job's "
        "token (--rdzv-token-file or DISTJOB_RDZV_TOKEN) or mutual TLS "
        "(--rdzv-tls-cert, --rdzv-tls-key and --rdzv-tls-ca)");
  }
  // A command that stops reading its stdin must not kill the agent.
  std::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<SpawnServer> s(new SpawnServer());
  s->service_ = std::make_unique<Service>(security.token, env, limits);
  ConnLimits conn_limits;
  conn_limits.max_conns = limits.max_conns;
  conn_limits.max_conns_per_peer = limits.max_conns_per_peer;
  conn_limits.name = "spawn server";
  conn_limits.total_cap = absl::StrCat(limits.max_conns, " connections");
  conn_limits.peer_cap =
      absl::StrCat(limits.max_conns_per_peer, " connections per address");
  auto conns = ConnLimiter::Listen(host, port, conn_limits, security.tls());
  if (!conns.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "spawn server on ", host, ":", port, ": ", conns.status().message()));
  }
  s->conns_ = *std::move(conns);
  s->port_ = s->conns_->port();
  // The launcher's readiness probe (grpc.health.v1, no token needed: it
  // says only that this server serves) and the pod's.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(limits.max_message_bytes);
  // A launcher that vanishes without closing its connection (its node
  // lost) is found by the missed pings, and its calls end their groups.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             kKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  s->acceptor_ = std::make_unique<GrpcFdAcceptor>(
      builder, MakeServerCredentials(security));
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the spawn server on ", host, ":", port));
  }
  s->server_->GetHealthCheckService()->SetServingStatus(kSpawnHealthService,
                                                        true);
  s->conns_->Start(s->acceptor_->Handoff());
  DJ_LOG_INFO("spawn server listening on {}:{}", host, s->port_);
  return s;
}

std::optional<JobEnd> SpawnServer::job_end() const {
  return service_ != nullptr ? service_->job_end() : std::nullopt;
}

void SpawnServer::Shutdown() {
  // Calls in flight are cancelled at the deadline; each ends its group.
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now()));
  server_.reset();
  conns_.reset();
}

}  // namespace distjob
