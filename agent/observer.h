// What the agent loop tells the outside about a run: one call per
// lifecycle step, fanned out to the metrics (observability/metrics.h), the HTTP
// endpoint (observability/http_server.h) and the event log
// (observability/event_log.h), so that agent/agent_loop.cc stays one line per
// hook.
#ifndef DISTJOB_AGENT_OBSERVER_H_
#define DISTJOB_AGENT_OBSERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/cli/options.h"
#include "common/environment.h"
#include "observability/event_log.h"
#include "observability/http_server.h"
#include "observability/metrics.h"
#include "observability/trainer_status.h"
#include "rendezvous/rendezvous.h"
#include "supervisor/supervisor.h"
#include "workerstore/tcpstore_server.h"

namespace distjob {

class Observer {
 public:
  // `metrics` outlives the observer (GlobalMetrics() in the agent).
  explicit Observer(Metrics* metrics) : metrics_(metrics) {}

  // Opens the event log and starts the HTTP endpoint the options ask for;
  // InvalidArgument naming the flag when either cannot be (exit 2).
  // With `supervisor`, also TORCHELASTIC_HEALTH_CHECK_PORT's endpoint over
  // its progress (it outlives the observer's Shutdown).
  absl::Status Start(const RunOptions& options,
                     const SupervisorInterface* supervisor = nullptr);
  void Shutdown();

  // job, role and node_rank for every series and event.
  void SetJob(const std::string& job, const std::string& role, int node_rank);
  void PeersResolved(int nnodes, absl::Duration waited);
  // The store this agent hosts (Rendezvous::HostedStoreStats; nullptr when
  // it hosts none), read at every scrape into the distjob_store_* series.
  void HostedStore(Rendezvous::StoreStatsSource stats);
  // The workers' TCPStore this agent serves (agent/worker_store; nullopt
  // while it serves none), read at every scrape into distjob_worker_store_*.
  using WorkerStoreStatsSource = std::function<std::optional<TcpStoreStats>()>;
  void WorkerStore(WorkerStoreStatsSource stats);
  void RoundClosed(const RendezvousResult& round, absl::Duration waited);
  void Attempt(int restart_count);
  void GroupRunning(bool running, int nproc);
  void GroupExited(GroupOutcome outcome);
  void WorkerFailed(const WorkerExit& failure, int exit_code,
                    const std::string& exit_class);
  void Oom(int64_t kills);
  void Hang();
  // An attempt's diagnostics file (agent/diagnostics) was written.
  // `summary`: one line per worker (where it waited), of the first
  // collection.
  void Diagnostics(const std::string& path, int attempt,
                   const std::vector<int>& unkillable,
                   const std::vector<std::string>& summary);
  void MembershipChange();
  // `cause`: retryable_exit, hang or oom.
  void Restart(const std::string& cause, int attempt);
  void Exit(int exit_code, const std::string& outcome, int stop_signal);

  // Starts Kubeflow Trainer v2's status push when `env`'s
  // KUBEFLOW_TRAINER_SERVER_* ask for it (OK and none when they do not);
  // its state follows the hooks above and Shutdown stops it.
  // InvalidArgument: a bad URL, token or CA file, named.
  absl::Status StartTrainerStatus(const EnvMap& env);
  TrainerStatusPoster* trainer_status() const { return trainer_.get(); }

  int metrics_port() const { return http_ ? http_->port() : 0; }

 private:
  // Sets the metrics' collector over both stores' sources.
  void InstallCollector();

  Metrics* metrics_;
  // Both set from the agent loop's thread; the collector reads copies.
  Rendezvous::StoreStatsSource hosted_store_;
  WorkerStoreStatsSource worker_store_;
  EventLog events_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpServer> progress_health_;  // --health-check-port
  std::unique_ptr<TrainerStatusPoster> trainer_;
};

}  // namespace distjob

#endif  // DISTJOB_AGENT_OBSERVER_H_
