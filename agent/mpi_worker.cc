#include "agent/mpi_worker.h"

#include <signal.h>
#include <time.h>

#include <memory>

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

// Waits for a stop signal (blocked: BlockAsyncSignalsAtStartup), reaping
// what the spawned commands leave behind meanwhile: as PID 1, or as the
// run's subreaper, this agent inherits every orphan of the job's daemons.
int WaitForStop(const std::vector<int>& stop_signals) {
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : stop_signals) sigaddset(&stops, sig);
  for (;;) {
    const int sig = sigtimedwait(&stops, nullptr, &kReapInterval);
    if (sig > 0) return sig;
    SpawnedCommand::ReapOrphans();
  }
}

}  // namespace

int RunMpiWorker(const RunOptions& options, const EnvMap& env,
                 HealthServer* started_health) {
  std::unique_ptr<HealthServer> own_health;
  HealthServer* health = started_health;
  if (health == nullptr && options.outcome.health_port != 0) {
    auto started = HealthServer::Start(
        options.outcome.health_port,
        options.outcome.health_tls ? &options.security : nullptr);
    if (!started.ok()) {
      DJ_LOG_ERROR("{}", OneLine(started.status().message()));
      return kExitBadConfig;
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
    return kExitBadConfig;
  }
  if (health != nullptr) health->SetReady(true);
  DJ_LOG_INFO("MPI worker: serving the launcher's spawns on port {}",
              (*server)->port());
  const int sig = WaitForStop(options.supervisor.stop_signals);
  DJ_LOG_INFO("MPI worker: stopped by signal {}; ending the spawned commands",
              sig);
  if (health != nullptr) health->SetReady(false);
  (*server)->Shutdown();
  return ExitCodeForSignal(sig);
}

}  // namespace distjob
