// distjob-agent: the in-pod launcher and rendezvous agent of a distributed
// training job. See README.md.
//
// The story of a run: parse what we were told (flags, PET_*/DISTJOB_* env),
// then hand over to the agent loop, which finds the peers, agrees on ranks,
// launches and supervises the workers, and returns the exit code whose
// class tells the operator what to do next. The other subcommands inspect
// (env, status, health) or install (install) without launching anything.
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_loop.h"
#include "agent/cli/options.h"
#include "agent/cli/run_flags.h"
#include "agent/completion.h"
#include "agent/env_command.h"
#include "agent/exit_codes.h"
#include "agent/fd_needs.h"
#include "agent/health.h"
#include "agent/install.h"
#include "agent/licenses.h"
#include "agent/mpi_launcher.h"
#include "agent/mpi_plan.h"
#include "agent/mpi_role.h"
#include "agent/nested_launcher.h"
#include "agent/outer_agent.h"
#include "agent/preflight_command.h"
#include "agent/report.h"
#include "agent/rsh_command.h"
#include "agent/run_preflight.h"
#include "agent/status_command.h"
#include "agent/version.h"
#include "common/environment.h"
#include "common/fd_budget.h"
#include "common/logging.h"
#include "common/text.h"
#include "launchers/worker_command.h"
#include "supervisor/process.h"

extern char** environ;

namespace distjob {
namespace {

constexpr char kUsage[] =
    "Usage: distjob-agent COMMAND [options]\n\n"
    "Commands:\n"
    "  run [options] [--] CMD [ARGS...]  launch and supervise the workers\n"
    "                                    (also: invoked as `torchrun`)\n"
    "  env [options] [--json] [--explain] [--] [CMD...]\n"
    "                                    print each worker's environment and\n"
    "                                    where it came from; launch nothing\n"
    "  status --rdzv-endpoint HOST[:PORT] [--rdzv-id ID] [--json]\n"
    "                                    the live state of a rendezvous\n"
    "  health --port N [--service S]     probe a running agent (exit 0/1)\n"
    "  preflight [options] [--json]     check DNS, the rendezvous endpoint,\n"
    "                                    ports, paths, devices, InfiniBand\n"
    "                                    and nvhcd (exit 0/10/20/30)\n"
    "  install [--dir] DIR               copy this binary to DIR (and link\n"
    "                                    DIR/torchrun to it): init containers\n"
    "  completion bash|zsh|tcsh          print a shell completion script\n"
    "  rsh [ssh options] HOST COMMAND... run COMMAND on an MPI worker's\n"
    "                                    spawn server (mpirun's remote shell)\n"
    "\n"
    "Options:\n"
    "  -h, --help     show this help (`distjob-agent run --help` for run)\n"
    "  --version      print the version, the commit and the protocol "
    "versions\n"
    "  --licenses     print the licences of the libraries linked in\n";

bool WantsHelp(const std::vector<std::string>& args) {
  // Only before the worker command: `run -- python --help` is the worker's.
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
    if (!a.empty() && a[0] != '-') return false;
  }
  return false;
}

// The termination message of a run whose options did not parse: the pod's
// status then says what was wrong. The path is the one the options would
// have named, as far as the environment tells.
void ReportBadConfig(const std::string& problem, const EnvMap& env) {
  RunReport report;
  report.outcome = "error";
  report.exit_code = kExitBadConfig;
  report.detail = problem;
  const std::string path = Lookup(env, "DISTJOB_TERMINATION_LOG")
                               .value_or(OutcomeOptions().termination_log);
  if (path.empty()) return;
  // Best effort, as on every exit: a path that cannot be written is skipped.
  (void)WriteTerminationMessage(path, FormatTerminationMessage(report));
}

int PrintCompletion(const std::string& shell, const EnvMap& env);

// A stop signal before the supervisor reads them (the handover request):
// the exit it would have given, with its termination message.
int StoppedAtStart(const sigset_t& stops, const EnvMap& env) {
  sigset_t pending;
  sigpending(&pending);
  int sig = SIGTERM;
  for (int s = 1; s < NSIG; ++s) {
    if (sigismember(&stops, s) == 1 && sigismember(&pending, s) == 1) {
      sig = s;
      break;
    }
  }
  RunReport report;
  report.outcome = "stopped";
  report.exit_code = ExitCodeForSignal(sig);
  report.stop_signal = sig;
  report.detail = StoppedWhileWaiting(sig, "the outer agent's handover");
  DJ_LOG_INFO("{}", report.detail);
  const std::string path = Lookup(env, "DISTJOB_TERMINATION_LOG")
                               .value_or(OutcomeOptions().termination_log);
  if (!path.empty()) {
    // Best effort, as above.
    (void)WriteTerminationMessage(path, FormatTerminationMessage(report));
  }
  return report.exit_code;
}

// An agent started below another agent's worker (its marker in `*env`)
// asks that agent to step aside and takes over its settings (into `*env`,
// where unset); `*key_suffix`: where its rendezvous keys go. Returns the
// exit code when it must not run (the outer cannot hand over). A marker
// nobody answers is stale: this agent runs as the top-level one.
std::optional<int> TakeOverFromOuter(EnvMap* env, std::string* key_suffix,
                                     const std::vector<int>& stop_signals) {
  const std::optional<std::string> marker = Lookup(*env, kOuterAgentVariable);
  if (!marker.has_value()) return std::nullopt;
  env->erase(kOuterAgentVariable);
  unsetenv(kOuterAgentVariable);  // not for a launcher it hands over to
  // The stop signals are blocked (BlockAsyncSignalsAtStartup): a signalfd
  // of them turns readable when one is pending, without taking it.
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : stop_signals) sigaddset(&stops, sig);
  const int stop_fd = signalfd(-1, &stops, SFD_CLOEXEC | SFD_NONBLOCK);
  auto reply = AskOuterToStepAside(*marker, absl::Seconds(30), stop_fd);
  if (stop_fd >= 0) close(stop_fd);
  if (absl::IsCancelled(reply.status())) return StoppedAtStart(stops, *env);
  if (!reply.ok()) {
    DJ_LOG_WARNING(
        "{} names no running agent ({}): running as the job's only "
        "launcher",
        kOuterAgentVariable, OneLine(reply.status().message()));
    return std::nullopt;
  }
  if (!reply->agreed) {
    const std::string problem = OneLine(
        "this launcher (distjob-agent run / torchrun) was " + reply->refusal);
    std::fprintf(stderr, "distjob-agent run: %s\n", problem.c_str());
    ReportBadConfig(problem, *env);
    return kExitBadConfig;
  }
  std::string taken, kept;
  for (const auto& [name, value] : reply->settings) {
    if (env->count(name) != 0) continue;  // its own variable wins
    (*env)[name] = value;
    setenv(name.c_str(), value.c_str(), 1);
    taken += (taken.empty() ? "" : ", ") + name;
  }
  for (const std::string& l : reply->lost) kept += "; cannot keep " + l;
  DJ_LOG_INFO(
      "started below another distjob-agent's worker: it stepped aside and "
      "this launcher runs the job (one rendezvous); took over {}{}",
      taken.empty() ? "no setting" : taken, kept);
  *key_suffix = reply->rdzv_key_suffix;
  return std::nullopt;
}

int Launch(const std::vector<std::string>& args, const EnvMap& env,
           bool as_torchrun) {
  // As PID 1 a signal with no handler is dropped, and the supervisor reads
  // signals only once the options are parsed: block them now, so that one
  // sent during start-up waits, pending, for the supervisor. The signal
  // state the agent inherited is captured first, for the workers.
  BlockAsyncSignalsAtStartup();
  if (WantsHelp(args)) {
    std::fputs(RunHelp().c_str(), stdout);
    return 0;
  }
  EnvMap run_env = env;
  Invocation invocation{as_torchrun, ""};
  auto options = ParseRunOptions(args, run_env, invocation);
  if (options.ok() && options->launch.print_completion.empty()) {
    // Before anything binds or joins: one launcher per job, always.
    if (std::optional<int> code =
            TakeOverFromOuter(&run_env, &invocation.rdzv_key_suffix,
                              options->supervisor.stop_signals)) {
      return *code;
    }
    if (!invocation.rdzv_key_suffix.empty() || run_env.size() != env.size()) {
      options = ParseRunOptions(args, run_env, invocation);
    }
  }
  if (!options.ok()) {
    // One line whatever the input held (newlines, NULs, 100 KB values).
    const std::string problem = OneLine(options.status().message());
    std::fprintf(stderr, "distjob-agent run: %s\n", problem.c_str());
    ReportBadConfig(problem, env);
    return kExitBadConfig;
  }
  if (!options->launch.print_completion.empty()) {
    return PrintCompletion(options->launch.print_completion, env);
  }
  if (IsLauncherCommand(options->command)) {
    return HandOverToLauncher(
        options->command, OptionsBeforeCommand(args, options->command.size()));
  }
  InitLogging(options->log_level);
  // Before any server listens (in RunAgent): the limit the pod was given
  // in force, and each store's share of it sized to the job.
  const OpenFileLimit nofile = RaiseOpenFileLimit();
  if (nofile.raised()) {
    DJ_LOG_INFO("open-file limit raised from {} to its hard limit {}",
                nofile.soft_before, nofile.soft);
  }
  DeclareStoreNeeds(options->launch);
  // MPI jobs: the workers serve spawns, the launcher runs mpirun through
  // them; neither takes part in a rendezvous.
  // A role the flags or K_MPI_JOB_ROLE gave; a Volcano job's roles are
  // known only after discovery, in RunAgent.
  if (options->mpi.role != MpiRole::kNone) {
    auto mpi = PlanExplicitMpi(*options, run_env);
    if (!mpi.ok()) {
      const std::string problem = OneLine(mpi.status().message());
      std::fprintf(stderr, "distjob-agent run: %s\n", problem.c_str());
      ReportBadConfig(problem, env);
      return kExitBadConfig;
    }
    return RunMpiRole(*options, run_env, *mpi, /*health=*/nullptr).exit_code;
  }
  // Before discovery waits (in RunAgent): a node or a manifest that cannot
  // run the job ends now, in its class.
  if (std::optional<int> code = PreflightBeforeRun(*options, run_env)) {
    return *code;
  }
  return RunAgent(*options, run_env);
}

int Run(const std::vector<std::string>& args, const EnvMap& env) {
  return Launch(args, env, /*as_torchrun=*/false);
}

int Env(const std::vector<std::string>& args, const EnvMap& env) {
  return EnvCommand(args, env);  // it answers --help with env's own usage
}

struct Subcommand {
  const char* name;
  int (*main)(const std::vector<std::string>& args, const EnvMap& env);
};

int Completion(const std::vector<std::string>& args, const EnvMap& env);

constexpr Subcommand kSubcommands[] = {
    {"run", Run},
    {"env", Env},
    {"status", StatusCommand},
    {"health", HealthCommand},
    {"preflight", PreflightCommand},
    {"install", InstallCommand},
    {"completion", Completion},
    {"rsh", RshCommand},
};

// Every subcommand's options, read from its own --help.
int PrintCompletion(const std::string& shell, const EnvMap& env) {
  std::vector<CompletedCommand> commands;
  for (const Subcommand& sub : kSubcommands) {
    CompletedCommand c{sub.name, {}};
    if (c.name != "completion") {
      c.options = OptionsInHelp(CaptureStdout([&] {
        // Only what --help prints is wanted, not its exit code.
        (void)sub.main({"--help"}, env);
      }));
    }
    commands.push_back(std::move(c));
  }
  auto script = CompletionScript(shell, commands);
  if (!script.ok()) {
    std::fprintf(stderr, "distjob-agent: --print-completion: %s\n",
                 std::string(script.status().message()).c_str());
    return kExitBadConfig;
  }
  std::fputs(script->c_str(), stdout);
  return 0;
}

int Completion(const std::vector<std::string>& args, const EnvMap& env) {
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help")) {
    std::puts(
        "Usage: distjob-agent completion bash|zsh|tcsh\n\n"
        "Prints a completion script for distjob-agent and torchrun, e.g.\n"
        "  source <(distjob-agent completion bash)");
    return 0;
  }
  if (args.size() != 1) {
    std::fputs(
        "distjob-agent completion: expected one argument, the shell: bash, "
        "zsh or tcsh\n",
        stderr);
    return kExitBadConfig;
  }
  return PrintCompletion(args[0], env);
}

int Main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves Mutex's lock-order
  // graph on: a debug check that cost the store ~10% of its CPU at 4096
  // nodes (docs/bench/profile-scale-4096.txt). Unit tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  InitLogging(LogLevel::kInfo);
  const EnvMap env = EnvFromEnvp(environ);
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string program = argv[0];
  if (program == "torchrun" || absl::EndsWith(program, "/torchrun")) {
    return Launch(args, env, /*as_torchrun=*/true);
  }
  // The MPI launcher's links: for Hydra and Intel MPI, and the `ssh` first
  // on mpirun's PATH for launchers that call ssh themselves (horovodrun's
  // checks, pdsh) (agent/mpi_launcher.h).
  for (const char* link : {kRshProgramName, kSshShimName}) {
    if (program == link || absl::EndsWith(program, std::string("/") + link)) {
      return RshCommand(args, env);
    }
  }
  if (args.empty() || args[0] == "-h" || args[0] == "--help" ||
      args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitBadConfig : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::fputs(VersionText().c_str(), stdout);
    return 0;
  }
  if (args[0] == "--licenses") {
    const absl::string_view text = ThirdPartyNotices();
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  for (const Subcommand& sub : kSubcommands) {
    if (command == sub.name) return sub.main(args, env);
  }
  std::string names;
  for (const Subcommand& sub : kSubcommands) {
    names += names.empty() ? sub.name : std::string(", ") + sub.name;
  }
  std::fprintf(stderr,
               "distjob-agent: unknown command '%s'; expected one of: %s (see "
               "--help)\n",
               command.c_str(), names.c_str());
  return kExitBadConfig;
}

}  // namespace
}  // namespace distjob

int main(int argc, char** argv) { return distjob::Main(argc, argv); }
