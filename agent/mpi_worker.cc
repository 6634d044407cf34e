#include "agent/mpi_worker.h"

#include <signal.h>
#include <time.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/exit_codes.h"
#include "agent/health.h"
#include "common/logging.h"
#include "common/text.h"
#include "spawn/spawn_server.h"
#include "spawn/spawned_command.h"

namespace distjob {
namespace {

// How long an orphan of a spawned command stays a zombie at most.
constexpr timespec kReapInterval = {0, 250 * 1000 * 1000};

// Waits for a stop signal (blocked: BlockAsyncSignalsAtStartup) or the
// launcher's EndJob, reaping what the spawned commands leave behind
// meanwhile: as PID 1, or as the run's subreaper, this agent inherits
// every orphan of the job's daemons. The report of the worker's end.
RunReport WaitForEnd(const std::vector<int>& stop_signals,
                     const SpawnServer& server) {
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : stop_signals) sigaddset(&stops, sig);
  for (;;) {
    const int sig = sigtimedwait(&stops, nullptr, &kReapInterval);
    if (sig > 0) {
      DJ_LOG_INFO(
          "MPI worker: stopped by signal {}; ending the spawned commands", sig);
      RunReport report = MakeRunReport("stopped", ExitCodeForSignal(sig), 0, 0);
      report.stop_signal = sig;
      return report;
    }
    SpawnedCommand::ReapOrphans();
    if (std::optional<JobEnd> end = server.job_end()) {
      DJ_LOG_INFO(
          "MPI worker: the launcher ({}) ended the job with {}: {}; ending "
          "the spawned commands",
          end->caller, end->exit_code, end->reason);
      RunReport report =
          MakeRunReport(end->exit_code == 0                 ? "success"
                        : end->exit_code >= kExitSignalBase ? "retryable"
                                                            : "permanent",
                        end->exit_code, 0, 0);
      report.detail =
          absl::StrCat("the MPI launcher ended the job: ", end->reason);
      return report;
    }
  }
}

}  // namespace

RunReport RunMpiWorker(const RunOptions& options, const EnvMap& env,
                       HealthServer* started_health) {
  std::unique_ptr<HealthServer> own_health;
  HealthServer* health = started_health;
  if (health == nullptr && options.outcome.health_port != 0) {
    auto started = HealthServer::Start(
        options.outcome.health_port,
        options.outcome.health_tls ? &options.security : nullptr);
    if (!started.ok()) {
      DJ_LOG_ERROR("{}", OneLine(started.status().message()));
      return MakeRunReport("error", kExitBadConfig, 0, 0);
    }
    own_health = *std::move(started);
    health = own_health.get();
  }
  // The commands get the agent's environment, the token's variable
  // included: Open MPI's tree spawn and Hydra's proxies call rsh from here
  // to reach the other workers.
  auto server = SpawnServer::Start(
      options.mpi.spawn_host, options.mpi.spawn_port, options.security, env);
  if (!server.ok()) {
    // No token or mutual TLS (refused by the flags already), or a port
    // that cannot be bound.
    DJ_LOG_ERROR("--spawn-port {}: {}", options.mpi.spawn_port,
                 OneLine(server.status().message()));
    return MakeRunReport("error", kExitBadConfig, 0, 0);
  }
  if (health != nullptr) health->SetReady(true);
  DJ_LOG_INFO("MPI worker: serving the launcher's spawns on port {}",
              (*server)->port());
  RunReport report = WaitForEnd(options.supervisor.stop_signals, **server);
  if (health != nullptr) health->SetReady(false);
  (*server)->Shutdown();
  return report;
}

}  // namespace distjob
