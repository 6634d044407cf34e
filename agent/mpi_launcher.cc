#include "agent/mpi_launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/exit_codes.h"
#include "agent/health.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/progress_log.h"
#include "common/text.h"
#include "launchers/mpi_env.h"
#include "spawn/spawn_limits.h"
#include "supervisor/process.h"

namespace distjob {
namespace {

// One probe's bound, and the pause between rounds: a stop signal is seen
// within about a second either way.
constexpr absl::Duration kProbeTimeout = absl::Milliseconds(500);
constexpr absl::Duration kRoundPause = absl::Milliseconds(500);
// From a stop signal forwarded to mpirun to its group's SIGKILL.
constexpr absl::Duration kStopGrace = absl::Seconds(10);

sigset_t SignalSet(const std::vector<int>& signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

// A pending stop signal, taken, waiting at most `wait`.
std::optional<int> TakeStop(const sigset_t& stops, absl::Duration wait) {
  const timespec ts = absl::ToTimespec(wait);
  const int sig = sigtimedwait(&stops, nullptr, &ts);
  if (sig > 0) return sig;
  return std::nullopt;
}

// Waits until every host's spawn server is SERVING; the stop signal that
// ended the wait, or 0 when all answer, or -1 past `wait`.
int AwaitSpawnServers(std::vector<std::string> missing,
                      const RunOptions& options, const sigset_t& stops) {
  const absl::Time deadline = absl::Now() + options.mpi.spawn_wait;
  const StoreSecurity* tls =
      options.security.tls() ? &options.security : nullptr;
  ProgressLog progress;
  while (!missing.empty()) {
    std::vector<std::string> still;
    for (const std::string& host : missing) {
      if (std::optional<int> sig = TakeStop(stops, absl::ZeroDuration())) {
        return *sig;
      }
      auto status = CheckHealth(host, options.mpi.spawn_port,
                                kSpawnHealthService, kProbeTimeout, tls);
      if (!status.ok() || *status != "SERVING") still.push_back(host);
    }
    missing = std::move(still);
    if (missing.empty()) break;
    if (absl::Now() >= deadline) {
      DJ_LOG_ERROR(
          "MPI launcher: no spawn server answers on port {} of {} after "
          "--spawn-wait {}",
          options.mpi.spawn_port, absl::StrJoin(missing, ", "),
          absl::FormatDuration(options.mpi.spawn_wait));
      return -1;
    }
    if (progress.Due()) {
      DJ_LOG_INFO("MPI launcher: waiting {} for the spawn servers of {}",
                  absl::FormatDuration(progress.Elapsed()),
                  absl::StrJoin(missing, ", "));
    }
    if (std::optional<int> sig = TakeStop(stops, kRoundPause)) return *sig;
  }
  return 0;
}

// A private directory holding kRshProgramName, a link to this binary, for
// the MPIs that exec their launcher as one program; empty when none could
// be made (Open MPI's variables still work then).
std::string MakeRshProgram(const std::string& agent_path) {
  const char* tmp = getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                 "/distjob-mpi-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return "";
  const std::string link = dir + "/" + kRshProgramName;
  if (symlink(agent_path.c_str(), link.c_str()) != 0) return "";
  return link;
}

std::string AgentPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "distjob-agent";
}

}  // namespace

absl::StatusOr<std::vector<std::string>> MpiHosts(
    const std::vector<std::string>& command, const EnvMap& env) {
  const MpiHostSource source = FindMpiHosts(command, env);
  std::vector<std::string> hosts = source.hosts;
  if (!source.hostfile.empty()) {
    const bool optional = source.hostfile == kOperatorHostfile;
    struct stat st;
    if (optional && stat(source.hostfile.c_str(), &st) != 0) return hosts;
    auto text = ReadInputFile(source.origin, source.hostfile, size_t{4} << 20);
    if (!text.ok()) return text.status();
    hosts = ParseMpiHostfile(*text);
  }
  std::vector<std::string> remote;
  for (const std::string& h : hosts) {
    if (h != "localhost") remote.push_back(h);
  }
  return remote;
}

namespace {

// Runs mpirun to its end, reaping every child (as PID 1, the orphans
// too); a stop signal is forwarded to mpirun's group, SIGKILL after a
// grace. mpirun's exit code, or 128+N for the stop signal N.
int SuperviseMpirun(pid_t pid, const sigset_t& stops) {
  sigset_t waited = stops;
  sigaddset(&waited, SIGCHLD);
  int stop = 0;
  absl::Time kill_at = absl::InfiniteFuture();
  while (true) {
    int status = 0;
    pid_t r;
    while ((r = waitpid(-1, &status, WNOHANG)) > 0) {
      if (r != pid) continue;
      if (stop != 0) return ExitCodeForSignal(stop);
      return WIFSIGNALED(status) ? ExitCodeForSignal(WTERMSIG(status))
                                 : WEXITSTATUS(status);
    }
    if (absl::Now() >= kill_at) {
      kill(-pid, SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    const timespec ts = absl::ToTimespec(absl::Milliseconds(200));
    const int sig = sigtimedwait(&waited, nullptr, &ts);
    if (sig > 0 && sig != SIGCHLD) {
      DJ_LOG_INFO("MPI launcher: signal {} forwarded to mpirun", sig);
      kill(-pid, sig);
      if (stop == 0) kill_at = absl::Now() + kStopGrace;
      stop = sig;
    }
  }
}

}  // namespace

int RunMpiLauncher(const RunOptions& options, const EnvMap& env) {
  auto hosts = MpiHosts(options.command, env);
  if (!hosts.ok()) {
    DJ_LOG_ERROR("{}", OneLine(hosts.status().message()));
    return kExitBadConfig;
  }
  const sigset_t stops = SignalSet(options.supervisor.stop_signals);
  DJ_LOG_INFO("MPI launcher: waiting for the spawn servers of {} (port {})",
              hosts->empty() ? "no remote host" : absl::StrJoin(*hosts, ", "),
              options.mpi.spawn_port);
  const int waited = AwaitSpawnServers(*hosts, options, stops);
  if (waited > 0) return ExitCodeForSignal(waited);
  if (waited < 0) return kExitRendezvousUnavailable;
  const std::string agent = AgentPath();
  const std::string rsh_program = MakeRshProgram(agent);
  ProcessSpec spec;
  spec.argv = options.command;
  spec.env = env;
  for (const auto& [name, value] : MpiLauncherEnv(agent, rsh_program)) {
    if (value.empty()) continue;  // no link: Hydra keeps its own launcher
    spec.env[name] = value;
  }
  auto spawned = SpawnProcess(spec, InheritedSignalState::Capture());
  int code;
  if (!spawned.ok()) {
    DJ_LOG_ERROR("MPI launcher: {}", OneLine(spawned.status().message()));
    code = kExitInternalError;
  } else if (spawned->exec_errno != 0) {
    DJ_LOG_ERROR("MPI launcher: cannot run {}: {}", options.command[0],
                 std::strerror(spawned->exec_errno));
    code = ExecFailureExitCode(spawned->exec_errno);
    int status;
    waitpid(spawned->pid, &status, 0);
  } else {
    code = SuperviseMpirun(spawned->pid, stops);
    DJ_LOG_INFO("MPI launcher: {} exited with {}", options.command[0], code);
  }
  if (!rsh_program.empty()) {
    unlink(rsh_program.c_str());
    rmdir(rsh_program.substr(0, rsh_program.rfind('/')).c_str());
  }
  return code;
}

}  // namespace distjob
