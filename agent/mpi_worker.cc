#include "agent/mpi_worker.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/exit_codes.h"
#include "agent/health.h"
#include "agent/rsh_env.h"
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

// The worker's private directory ($TMPDIR/distjob-spawn-XXXXXX, 0700) for
// the token's file the spawned commands' rsh reads; removed with it.
class SpawnDir {
 public:
  // Made only when `needed`: a token that came as a file is passed on as
  // that file's path.
  explicit SpawnDir(bool needed) {
    if (!needed) return;
    const char* tmp = getenv("TMPDIR");
    std::string dir = absl::StrCat(
        tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/distjob-spawn-XXXXXX");
    if (mkdtemp(dir.data()) != nullptr) path_ = std::move(dir);
  }
  ~SpawnDir() {
    if (path_.empty()) return;
    unlink(absl::StrCat(path_, "/", kRshTokenFile).c_str());
    rmdir(path_.c_str());
  }
  SpawnDir(const SpawnDir&) = delete;
  SpawnDir& operator=(const SpawnDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
  // The commands get the agent's environment with rsh's settings (Open
  // MPI's tree spawn and Hydra's proxies call rsh from here to reach the
  // other workers), the token as a private file's path, never its value.
  const SpawnDir dir(!options.security.token.empty() &&
                     options.security_files.token_file.empty());
  auto command_env = MakeRshEnv(options, env, dir.path());
  if (!command_env.ok()) {
    DJ_LOG_ERROR("MPI worker: {}", OneLine(command_env.status().message()));
    return MakeRunReport("error", kExitInternalError, 0, 0);
  }
  auto server =
      SpawnServer::Start(options.mpi.spawn_host, options.mpi.spawn_port,
                         options.security, *command_env);
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
