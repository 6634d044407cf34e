#include "agent/run_preflight.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/exit_codes.h"
#include "agent/preflight_command.h"
#include "agent/report.h"
#include "common/logging.h"
#include "rendezvous/rdzv_config.h"

namespace distjob {
namespace {

// As c10d_rendezvous decides: a node whose endpoint host is its own (or
// is_host=true) starts the store rather than reaching it; one that took
// over from an outer agent never does.
bool HostsStore(const LaunchOptions& launch) {
  if (!launch.rdzv_key_suffix.empty()) return false;
  return launch.rdzv_config.is_host.value_or(IsLocalHost(launch.endpoint.host));
}

void LogResult(const PreflightResult& r) {
  const std::string line = absl::StrCat("preflight: ", SummaryLine(r));
  switch (r.result) {
    case PreflightClass::kPass:
      DJ_LOG_INFO("{}", line);
      break;
    case PreflightClass::kWarning:
      DJ_LOG_WARNING("{}", line);
      break;
    default:
      DJ_LOG_ERROR("{}", line);
  }
}

int Stop(const RunOptions& options, int code, const std::string& outcome,
         const std::string& detail) {
  DJ_LOG_ERROR("{} (exit {})", detail, code);
  RunReport report;
  report.outcome = outcome;
  report.exit_code = code;
  report.detail = detail;
  if (!options.outcome.termination_log.empty()) {
    // Best effort, as on every exit: a path that cannot be written is
    // skipped.
    (void)WriteTerminationMessage(options.outcome.termination_log,
                                  FormatTerminationMessage(report));
  }
  return code;
}

}  // namespace

absl::StatusOr<PreflightOptions> RunPreflightChecks(const RunOptions& options,
                                                    const EnvMap& env) {
  const DiscoveryOptions& d = options.discovery;
  PreflightOptions checks;
  auto names = PreflightNames(options.launch.master_addr, d.peers, d.peers_file,
                              d.volcano_dir, env);
  if (!names.ok()) return names.status();
  checks.names = *std::move(names);
  checks.dns_servers = d.dns_servers;
  // The etcd backends' endpoints are URLs of a service outside the job,
  // which discovery does not wait for: only c10d's store is checked.
  if (options.launch.rdzv_backend == RdzvBackend::kC10d &&
      !HostsStore(options.launch)) {
    checks.rdzv_endpoint = options.launch.endpoint.ToString();
  }
  checks.paths = options.preflight.paths;
  checks.writable_paths = options.preflight.writable_paths;
  checks.health_daemon = options.preflight.health_daemon;
  return checks;
}

std::optional<int> PreflightBeforeRun(const RunOptions& options,
                                      const EnvMap& env) {
  if (!options.preflight.enabled) return std::nullopt;
  auto checks = RunPreflightChecks(options, env);
  if (!checks.ok()) {
    return Stop(options, kExitBadConfig, "error",
                absl::StrCat("preflight: ", checks.status().message()));
  }
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : options.supervisor.stop_signals) sigaddset(&stops, sig);
  auto stopped = [&stops] {
    sigset_t pending;
    sigpending(&pending);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sigismember(&stops, sig) == 1 && sigismember(&pending, sig) == 1) {
        return true;
      }
    }
    return false;
  };
  const std::vector<PreflightResult> results = RunPreflight(*checks, stopped);
  for (const PreflightResult& r : results) LogResult(r);
  if (stopped()) return std::nullopt;  // the supervisor reads the signal
  const PreflightClass overall = Overall(results);
  if (overall == PreflightClass::kPass || overall == PreflightClass::kWarning) {
    DJ_LOG_INFO("preflight: {}: starting", PreflightClassName(overall));
    return std::nullopt;
  }
  std::string worst;
  for (const PreflightResult& r : results) {
    if (r.result == overall) {
      worst = SummaryLine(r);
      break;
    }
  }
  const bool fatal = overall == PreflightClass::kFatal;
  return Stop(
      options, fatal ? kExitBadConfig : kExitRetryElsewhere,
      fatal ? "permanent" : "retryable",
      absl::StrCat("preflight: ", PreflightClassName(overall), ": ", worst));
}

}  // namespace distjob
