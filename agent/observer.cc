#include "agent/observer.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/build_info.h"
#include "agent/progress_health.h"
#include "common/logging.h"
#include "supervisor/signal_names.h"

namespace distjob {

absl::Status Observer::Start(const RunOptions& options,
                             const SupervisorInterface* supervisor) {
  // Lines before this one (flag errors) are text: the format is a flag.
  if (options.observability.log_format != LogFormat::kText) {
    InitLogging(options.log_level, options.observability.log_format);
  }
  if (absl::Status opened =
          events_.Open(options.observability.event_log_handler);
      !opened.ok()) {
    return opened;
  }
  // Before the server listens: a scrape as the agent starts must not see
  // series without the job's labels (dashboards select on them).
  metrics_->SetBuild(BuildVersion(), BuildCommit());
  SetJob(options.launch.rdzv_id, options.launch.role, options.launch.node_rank);
  const ObservabilityOptions& o = options.observability;
  if (o.metrics_port == 0 &&
      (!o.metrics_tls_cert.empty() || !o.metrics_tls_key.empty())) {
    return absl::InvalidArgumentError(
        "--metrics-tls-cert/--metrics-tls-key need --metrics-port: there is "
        "no endpoint to serve over TLS");
  }
  if (o.metrics_port != 0) {
    HttpServerOptions http_options;
    http_options.port = o.metrics_port;
    http_options.timeout = o.metrics_timeout;
    http_options.tls_cert = o.metrics_tls_cert;
    http_options.tls_key = o.metrics_tls_key;
    auto http = HttpServer::Start(http_options, metrics_);
    if (!http.ok()) return http.status();
    http_ = *std::move(http);
    DJ_LOG_INFO("metrics and HTTP probes on port {}{}", http_->port(),
                o.metrics_tls_cert.empty() ? "" : " (HTTPS)");
  }
  if (supervisor != nullptr) {
    auto progress = StartProgressHealth(o, supervisor);
    if (!progress.ok()) return progress.status();
    progress_health_ = *std::move(progress);
    if (progress_health_ != nullptr) {
      DJ_LOG_INFO("worker progress health check on port {}",
                  progress_health_->port());
    }
  }
  Json started = Json::object();
  started["pid"] = static_cast<int64_t>(getpid());
  started["nnodes"] = options.launch.nnodes;
  started["nproc_per_node"] = options.launch.nproc;
  started["max_restarts"] = options.launch.max_restarts;
  events_.Emit("started", started);
  return absl::OkStatus();
}

void Observer::Shutdown() {
  if (http_ != nullptr) http_->Shutdown();
  if (progress_health_ != nullptr) progress_health_->Shutdown();
  if (trainer_ != nullptr) trainer_->Shutdown();
}

void Observer::SetJob(const std::string& job, const std::string& role,
                      int node_rank) {
  metrics_->SetJobLabels(job, role, node_rank);
  SetLogContext("job", job);
  SetLogContext("role", role);
  SetLogContext("node_rank", node_rank);
  events_.SetContext("job", job);
  events_.SetContext("role", role);
  events_.SetContext("node_rank", node_rank);
}

void Observer::PeersResolved(int nnodes, absl::Duration waited) {
  metrics_->Set("distjob_dns_wait_seconds", absl::ToDoubleSeconds(waited));
  Json fields = Json::object();
  fields["nnodes"] = nnodes;
  fields["dns_wait_seconds"] = absl::ToDoubleSeconds(waited);
  events_.Emit("peers_resolved", fields);
}

void Observer::HostedStore(Rendezvous::StoreStatsSource stats) {
  hosted_store_ = std::move(stats);
  InstallCollector();
}

void Observer::WorkerStore(WorkerStoreStatsSource stats) {
  worker_store_ = std::move(stats);
  InstallCollector();
}

void Observer::InstallCollector() {
  if (!hosted_store_ && !worker_store_) {
    metrics_->SetCollector(nullptr);
    return;
  }
  metrics_->SetCollector([hosted = hosted_store_,
                          worker = worker_store_](Metrics& metrics) {
    // A store that is gone (or not served now) keeps its last values.
    const std::optional<StoreStats> s = hosted ? hosted() : std::nullopt;
    if (s) {
      metrics.Set("distjob_store_keys", static_cast<double>(s->keys));
      metrics.Set("distjob_store_bytes", static_cast<double>(s->bytes));
      metrics.Set("distjob_store_parked_waits",
                  static_cast<double>(s->parked_waits));
      metrics.Set("distjob_store_lease_expiries_total",
                  static_cast<double>(s->lease_expiries));
      metrics.Set("distjob_store_connections",
                  static_cast<double>(s->connections));
      const std::pair<const char*, int64_t> closed[] = {
          {"refused", s->connections_refused},
          {"evicted", s->connections_evicted},
          {"protocol_mismatch", s->connections_mismatched}};
      for (const auto& [reason, n] : closed) {
        metrics.Set("distjob_store_connections_closed_total",
                    static_cast<double>(n),
                    absl::StrCat("reason=\"", reason, "\""));
      }
      for (const StoreRequestCount& r : s->requests) {
        metrics.Set("distjob_store_requests_total",
                    static_cast<double>(r.count),
                    absl::StrCat("method=\"", EscapeLabelValue(r.method),
                                 "\",code=\"", EscapeLabelValue(r.code), "\""));
      }
    }
    const std::optional<TcpStoreStats> w = worker ? worker() : std::nullopt;
    metrics.Set("distjob_worker_store_serving", w ? 1 : 0);
    if (!w) return;
    metrics.Set("distjob_worker_store_keys", static_cast<double>(w->keys));
    metrics.Set("distjob_worker_store_bytes", static_cast<double>(w->bytes));
    metrics.Set("distjob_worker_store_clients",
                static_cast<double>(w->clients));
    metrics.Set("distjob_worker_store_parked_waits",
                static_cast<double>(w->parked_waits));
    metrics.Set("distjob_worker_store_protocol_errors_total",
                static_cast<double>(w->protocol_errors));
    metrics.Set("distjob_worker_store_refused_connections_total",
                static_cast<double>(w->refused_connections));
    metrics.Set("distjob_worker_store_accept_pauses_total",
                static_cast<double>(w->accept_pauses));
    metrics.Set("distjob_worker_store_buffered_bytes",
                static_cast<double>(w->buffered_bytes));
    metrics.Set("distjob_worker_store_evictions_total",
                static_cast<double>(w->evictions));
    for (const auto& [op, count] : w->requests) {
      metrics.Set("distjob_worker_store_requests_total",
                  static_cast<double>(count),
                  absl::StrCat("op=\"", EscapeLabelValue(op), "\""));
    }
  });
}

void Observer::RoundClosed(const RendezvousResult& round,
                           absl::Duration waited) {
  metrics_->Observe("distjob_rendezvous_duration_seconds",
                    absl::ToDoubleSeconds(waited));
  metrics_->Observe("distjob_rendezvous_wait_seconds", round.peer_wait_seconds);
  metrics_->Increment("distjob_rendezvous_rounds_total");
  metrics_->Set("distjob_rendezvous_round", static_cast<double>(round.round));
  metrics_->Set("distjob_group_rank", round.group_rank);
  metrics_->Set("distjob_group_world_size", round.group_world_size);
  if (trainer_ != nullptr) trainer_->SetGroupRank(round.group_rank);
  SetLogContext("round", round.round);
  events_.SetContext("round", round.round);
  Json fields = Json::object();
  fields["group_rank"] = round.group_rank;
  fields["group_world_size"] = round.group_world_size;
  fields["base_rank"] = round.base_rank;
  fields["world_size"] = round.world_size;
  fields["master_addr"] = round.master_addr;
  fields["master_port"] = round.master_port;
  fields["wait_seconds"] = absl::ToDoubleSeconds(waited);
  events_.Emit("round_closed", fields);
}

void Observer::Attempt(int restart_count) {
  metrics_->Set("distjob_attempt", restart_count);
  if (trainer_ != nullptr) trainer_->SetAttempt(restart_count);
  SetLogContext("attempt", restart_count);
  events_.SetContext("attempt", restart_count);
}

void Observer::GroupRunning(bool running, int nproc) {
  if (http_ != nullptr) http_->SetReady(running);
  metrics_->Set("distjob_local_workers_alive", running ? nproc : 0);
  if (trainer_ != nullptr && running) trainer_->SetPhase("running");
  if (running) {
    Json fields = Json::object();
    fields["local_world_size"] = nproc;
    events_.Emit("workers_started", fields);
  }
}

void Observer::GroupExited(GroupOutcome outcome) {
  Json fields = Json::object();
  switch (outcome) {
    case GroupOutcome::kSucceeded:
      fields["outcome"] = "succeeded";
      break;
    case GroupOutcome::kFailed:
      fields["outcome"] = "failed";
      break;
    case GroupOutcome::kStopped:
      fields["outcome"] = "stopped";
      break;
    case GroupOutcome::kInterrupted:
      fields["outcome"] = "interrupted";
      break;
  }
  events_.Emit("group_exited", fields);
}

void Observer::WorkerFailed(const WorkerExit& failure, int exit_code,
                            const std::string& exit_class) {
  metrics_->Set("distjob_last_exit_code", exit_code);
  if (trainer_ != nullptr) trainer_->WorkerFailed(exit_code, exit_class);
  for (const char* other : {"retryable", "permanent"}) {
    metrics_->Set("distjob_last_exit_class", 0,
                  absl::StrCat("class=\"", other, "\""));
  }
  metrics_->Set("distjob_last_exit_class", 1,
                absl::StrCat("class=\"", exit_class, "\""));
  metrics_->Increment("distjob_worker_exits_total",
                      absl::StrCat("class=\"", exit_class, "\""));
  Json fields = Json::object();
  fields["local_rank"] = failure.local_rank;
  fields["pid"] = static_cast<int64_t>(failure.pid);
  fields["exit_code"] = exit_code;
  if (failure.term_signal != 0) {
    fields["signal"] = SignalName(failure.term_signal);
  }
  fields["class"] = exit_class;
  events_.Emit("worker_exited", fields);
}

void Observer::Oom(int64_t kills) {
  Json fields = Json::object();
  fields["kills"] = kills;
  events_.Emit("oom", fields);
}

void Observer::Hang() { events_.Emit("hang"); }

void Observer::Diagnostics(const std::string& path, int attempt,
                           const std::vector<int>& unkillable,
                           const std::vector<std::string>& summary) {
  Json fields = Json::object();
  fields["path"] = path;
  fields["attempt"] = attempt;
  fields["unkillable_local_ranks"] = unkillable;
  fields["workers"] = summary;
  events_.Emit("diagnostics", fields);
}

void Observer::MembershipChange() {
  metrics_->Increment("distjob_worker_group_restarts_total",
                      "cause=\"membership_change\"");
  events_.Emit("membership_change");
}

void Observer::Restart(const std::string& cause, int attempt) {
  metrics_->Increment("distjob_worker_group_restarts_total",
                      absl::StrCat("cause=\"", cause, "\""));
  if (trainer_ != nullptr) trainer_->Restarted(attempt);
  Json fields = Json::object();
  fields["cause"] = cause;
  fields["next_attempt"] = attempt;
  events_.Emit("restart", fields);
}

void Observer::Exit(int exit_code, const std::string& outcome,
                    int stop_signal) {
  if (stop_signal != 0) {
    Json fields = Json::object();
    fields["signal"] = SignalName(stop_signal);
    events_.Emit("stop_signal", fields);
  }
  Json fields = Json::object();
  fields["exit_code"] = exit_code;
  fields["outcome"] = outcome;
  events_.Emit("exit", fields);
  metrics_->Set("distjob_local_workers_alive", 0);
  if (trainer_ != nullptr) trainer_->SetPhase(outcome);
}

absl::Status Observer::StartTrainerStatus(const EnvMap& env) {
  std::string warning;
  auto config = TrainerStatusConfigFromEnv(env, &warning);
  if (!warning.empty()) DJ_LOG_WARNING("{}", warning);
  if (!config.ok()) return config.status();
  if (!config->has_value()) return absl::OkStatus();
  auto poster = TrainerStatusPoster::Start(**std::move(config));
  if (!poster.ok()) return poster.status();
  trainer_ = *std::move(poster);
  return absl::OkStatus();
}

}  // namespace distjob
