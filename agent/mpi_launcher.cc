#include "agent/mpi_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/exit_codes.h"
#include "agent/health.h"
#include "agent/mpi_lost_hosts.h"
#include "agent/rsh_env.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/progress_log.h"
#include "common/resolver.h"
#include "common/route_interface.h"
#include "common/text.h"
#include "launchers/mpi_env.h"
#include "spawn/spawn_client.h"
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
// How long mpirun may run on after a worker was lost before the launcher
// ends it (Open MPI and Hydra end by themselves within a second or two
// when a running job loses a daemon, not when it never started).
constexpr absl::Duration kLostGrace = absl::Seconds(5);
// How long a failed mpirun's launcher probes the workers for a lost one,
// all of them together.
constexpr absl::Duration kLossProbeBudget = absl::Seconds(3);
// How many workers are probed at once.
constexpr size_t kProbeThreads = 16;
// How long the launcher's word that the job ended may take, to all the
// workers together.
constexpr absl::Duration kEndJobTimeout = absl::Seconds(1);
// The record of lost workers in the private directory (mpi_lost_hosts.h).
constexpr char kLostHostsFile[] = "lost-hosts";

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

// The launcher's private directory ($TMPDIR/distjob-mpi-XXXXXX, mode
// 0700): kRshProgramName, the hostfiles it writes, the lost hosts' record
// and the token's file for rsh (agent/rsh_env.h). Empty when none
// could be made.
std::string MakePrivateDir() {
  const char* tmp = getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                 "/distjob-mpi-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return "";
  return dir;
}

// Whether `name` in `dir` could be made a link to `agent_path`.
bool MakeLink(const std::string& dir, const char* name,
              const std::string& agent_path) {
  if (dir.empty()) return false;
  const std::string link = absl::StrCat(dir, "/", name);
  return symlink(agent_path.c_str(), link.c_str()) == 0;
}

// kRshProgramName in `dir`, a link to this binary, for the MPIs that exec
// their launcher as one program; empty when none could be made (Open
// MPI's variables still work then).
std::string MakeRshProgram(const std::string& dir,
                           const std::string& agent_path) {
  if (!MakeLink(dir, kRshProgramName, agent_path)) return "";
  return dir + "/" + kRshProgramName;
}

// `text` into a new file `path`, readable by this user only.
absl::Status WritePrivateFile(const std::string& path,
                              const std::string& text) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return absl::InternalError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return absl::OkStatus();
}

// The discovered workers as mpirun's hostfiles in `dir`, one per format;
// the variables that name them to each MPI.
absl::StatusOr<EnvMap> WriteHostfiles(const std::string& dir,
                                      const std::vector<std::string>& hosts,
                                      int slots) {
  if (dir.empty()) {
    return absl::InternalError(
        "no private directory for the hostfile under $TMPDIR");
  }
  const std::string open_mpi = dir + "/hostfile";
  const std::string hydra = dir + "/hostfile.hydra";
  if (absl::Status s =
          WritePrivateFile(open_mpi, OpenMpiHostfile(hosts, slots));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WritePrivateFile(hydra, HydraHostfile(hosts, slots));
      !s.ok()) {
    return s;
  }
  return MpiHostfileEnv(open_mpi, hydra);
}

void RemovePrivateDir(const std::string& dir) {
  if (dir.empty()) return;
  for (const char* name : {kRshProgramName, kSshShimName, "hostfile",
                           "hostfile.hydra", kLostHostsFile, kRshTokenFile}) {
    unlink(absl::StrCat(dir, "/", name).c_str());
  }
  rmdir(dir.c_str());
}

std::string AgentPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "distjob-agent";
}

}  // namespace

absl::StatusOr<MpiLaunchHosts> MpiHosts(const std::vector<std::string>& command,
                                        const EnvMap& env,
                                        const MpiPlan& plan) {
  const MpiHostSource source = FindMpiHosts(command, env);
  MpiLaunchHosts found;
  std::vector<std::string> hosts = source.hosts;
  found.origin = source.origin;
  if (!source.hostfile.empty()) {
    struct stat st;
    if (source.hostfile == kOperatorHostfile &&
        stat(source.hostfile.c_str(), &st) != 0) {
      // Named nowhere: the workers discovery found, when it found any.
      found.hosts = plan.worker_hosts;
      found.origin = plan.worker_hosts_source;
      found.from_peers = !plan.worker_hosts.empty();
      return found;
    }
    auto text = ReadInputFile(source.origin, source.hostfile, size_t{4} << 20);
    if (!text.ok()) return text.status();
    hosts = ParseMpiHostfile(*text);
    found.origin = absl::StrCat(source.origin, " ", source.hostfile);
  }
  for (const std::string& h : hosts) {
    if (h != "localhost") found.hosts.push_back(h);
  }
  return found;
}

namespace {

// How mpirun ended: its exit code (128+N when signal N killed it), and
// the launcher's stop signal when one came first.
struct MpirunEnd {
  int code = 0;
  int stop_signal = 0;
};

// Runs mpirun to its end, reaping every child (as PID 1, the orphans
// too). A stop signal is forwarded to mpirun's group, SIGKILL after a
// grace. The rsh record (mpi_lost_hosts.h) is watched meanwhile: a call a
// worker refused ends mpirun at once, a lost worker once mpirun has had
// kLostGrace to end by itself (Hydra waits for ever for a proxy that
// never started). A broken call to a host the launcher did not wait for
// starts the grace too: Hydra would wait for that proxy for ever as well,
// and JudgeMpirunEnd names the host as the job's configuration error.
class MpirunSupervision {
 public:
  MpirunSupervision(pid_t pid, const sigset_t& stops, std::string lost_file)
      : pid_(pid), lost_file_(std::move(lost_file)), waited_(stops) {
    sigaddset(&waited_, SIGCHLD);
  }

  MpirunEnd Run() {
    while (true) {
      int status = 0;
      pid_t r;
      while ((r = waitpid(-1, &status, WNOHANG)) > 0) {
        if (r != pid_) continue;
        end_.code = WIFSIGNALED(status) ? ExitCodeForSignal(WTERMSIG(status))
                                        : WEXITSTATUS(status);
        return end_;
      }
      const absl::Time now = absl::Now();
      if (now >= kill_at_) {
        kill(-pid_, SIGKILL);
        kill_at_ = absl::InfiniteFuture();
      }
      WatchRecord(now);
      const timespec ts = absl::ToTimespec(absl::Milliseconds(200));
      const int sig = sigtimedwait(&waited_, nullptr, &ts);
      if (sig > 0 && sig != SIGCHLD) {
        DJ_LOG_INFO("MPI launcher: signal {} forwarded to mpirun", sig);
        kill(-pid_, sig);
        if (end_.stop_signal == 0) kill_at_ = absl::Now() + kStopGrace;
        end_.stop_signal = sig;
      }
    }
  }

 private:
  // Reads the record when it grew; ends mpirun when it says to.
  void WatchRecord(absl::Time now) {
    struct stat st;
    if (!lost_file_.empty() && stat(lost_file_.c_str(), &st) == 0 &&
        st.st_size != record_size_) {
      record_size_ = st.st_size;
      std::vector<LostHost> refused;
      for (LostHost& host : ReadLostHosts(lost_file_)) {
        if (host.refused) {
          refused.push_back(std::move(host));
        } else if (lost_at_ == absl::InfiniteFuture()) {
          lost_at_ = now;
        }
      }
      if (!refused.empty()) {
        EndMpirun(absl::StrCat("a worker refused its call: ",
                               DescribeLostHosts(refused)));
      }
    }
    if (now - lost_at_ >= kLostGrace) {
      EndMpirun(absl::StrCat("it still runs ", absl::FormatDuration(kLostGrace),
                             " after a worker was lost"));
    }
  }

  // SIGTERM to mpirun's group, SIGKILL after kStopGrace; once.
  void EndMpirun(const std::string& why) {
    if (ending_ || end_.stop_signal != 0) return;
    ending_ = true;
    DJ_LOG_ERROR("MPI launcher: ending mpirun: {}", why);
    kill(-pid_, SIGTERM);
    kill_at_ = absl::Now() + kStopGrace;
  }

  const pid_t pid_;
  const std::string lost_file_;
  sigset_t waited_;
  MpirunEnd end_;
  absl::Time kill_at_ = absl::InfiniteFuture();
  absl::Time lost_at_ = absl::InfiniteFuture();
  off_t record_size_ = 0;
  bool ending_ = false;
};

// Whether `host`'s spawn server answers SERVING, asked twice: one slow
// answer (a DNS search list, a TLS handshake) must not make a live worker
// lost.
bool AnswersTwice(const std::string& host, const RunOptions& options) {
  const StoreSecurity* tls =
      options.security.tls() ? &options.security : nullptr;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto status = CheckHealth(host, options.mpi.spawn_port, kSpawnHealthService,
                              kProbeTimeout, tls);
    if (status.ok() && *status == "SERVING") return true;
  }
  return false;
}

// The workers whose spawn server no longer answers, probed kProbeThreads
// at a time within kLossProbeBudget: a worker that died where no rsh of
// the launcher saw it (Open MPI's tree spawn reaches most daemons from
// other workers). Hosts left unprobed at the deadline are logged.
std::vector<LostHost> UnansweringHosts(const std::vector<std::string>& hosts,
                                       const RunOptions& options) {
  const absl::Time deadline = absl::Now() + kLossProbeBudget;
  std::vector<char> lost(hosts.size(), 0), probed(hosts.size(), 0);
  std::atomic<size_t> next{0};
  const auto probe = [&] {
    for (size_t i; (i = next.fetch_add(1)) < hosts.size();) {
      if (absl::Now() >= deadline) return;
      probed[i] = 1;
      lost[i] = AnswersTwice(hosts[i], options) ? 0 : 1;
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(hosts.size(), kProbeThreads); ++t) {
    threads.emplace_back(probe);
  }
  for (std::thread& t : threads) t.join();
  std::vector<LostHost> found;
  size_t unprobed = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (lost[i])
      found.push_back({hosts[i], "its spawn server no longer answers"});
    unprobed += probed[i] ? 0 : 1;
  }
  if (unprobed > 0) {
    DJ_LOG_WARNING(
        "MPI launcher: {} of {} workers not probed for a loss "
        "within {}",
        unprobed, hosts.size(), absl::FormatDuration(kLossProbeBudget));
  }
  return found;
}

// Moves the records of `lost` for hosts the launcher did not wait for to
// the result. Only the waited-for hosts' spawn servers are known to have
// answered, so only their failure now is a loss; a call to any other host
// (one mpirun names otherwise, e.g. cut short or mistyped) failed because
// it was never part of the job.
std::vector<LostHost> NotWaitedFor(std::vector<LostHost>* lost,
                                   const MpiLaunchHosts& hosts) {
  const std::set<std::string> waited(hosts.hosts.begin(), hosts.hosts.end());
  const auto strays = std::stable_partition(
      lost->begin(), lost->end(),
      [&](const LostHost& l) { return waited.count(l.host) > 0; });
  std::vector<LostHost> out(std::make_move_iterator(strays),
                            std::make_move_iterator(lost->end()));
  lost->erase(strays, lost->end());
  return out;
}

// The launcher's report once mpirun has ended: a failure with a worker
// lost is retryable whatever mpirun's code (it is often a rank's 1).
RunReport JudgeMpirunEnd(const MpirunEnd& end, const std::string& lost_file,
                         const MpiLaunchHosts& hosts,
                         const RunOptions& options) {
  const std::string& program = options.command[0];
  if (end.stop_signal != 0) {
    RunReport report =
        MakeRunReport("stopped", ExitCodeForSignal(end.stop_signal), 0, 0);
    report.stop_signal = end.stop_signal;
    return report;
  }
  std::vector<LostHost> lost, refused;
  for (LostHost& host : ReadLostHosts(lost_file)) {
    (host.refused ? refused : lost).push_back(std::move(host));
  }
  if (!refused.empty()) {
    RunReport report = MakeRunReport("error", kExitBadConfig, 0, 0);
    report.detail = absl::StrCat("a worker refused mpirun's remote launch: ",
                                 DescribeLostHosts(refused));
    DJ_LOG_ERROR("MPI launcher: {}", report.detail);
    return report;
  }
  if (end.code == 0) return MakeRunReport("success", 0, 0, 0);
  const std::vector<LostHost> strays = NotWaitedFor(&lost, hosts);
  if (lost.empty()) lost = UnansweringHosts(hosts.hosts, options);
  if (!lost.empty()) {
    RunReport report = MakeRunReport("retryable", kExitRetryElsewhere, 0, 0);
    report.detail =
        absl::StrCat("MPI worker lost mid-job: ", DescribeLostHosts(lost), "; ",
                     program, " exited with ", end.code);
    DJ_LOG_ERROR(
        "MPI launcher: {}; exit {} (retryable: the job can run "
        "again once the worker is back)",
        report.detail, kExitRetryElsewhere);
    return report;
  }
  if (!strays.empty()) {
    // Not retryable: the same command calls the same hosts again.
    RunReport report = MakeRunReport("error", kExitBadConfig, 0, 0);
    report.detail = absl::StrCat(
        program,
        " called hosts the launcher did not wait for (not in its "
        "hostfile or host list): ",
        DescribeLostHosts(strays), "; ", program, " exited with ", end.code);
    DJ_LOG_ERROR("MPI launcher: {}", report.detail);
    return report;
  }
  RunReport report = MakeRunReport(
      end.code >= kExitSignalBase ? "retryable" : "permanent", end.code, 0, 0);
  report.detail = absl::StrCat(program, " exited with ", end.code);
  return report;
}

// Tells every worker that the job ended (`report`'s code and reason), so
// that their pods end too, with the job's class: best effort, bounded by
// kEndJobTimeout; a worker not told ends on its own stop signal.
void TellWorkersTheJobEnded(const std::vector<std::string>& hosts,
                            const RunOptions& options,
                            const RunReport& report) {
  if (hosts.empty()) return;
  const std::vector<EndJobAnswer> answers =
      EndJobOnHosts(hosts, options.mpi.spawn_port, options.security,
                    report.exit_code, EndReason(report), kEndJobTimeout);
  std::vector<std::string> untold;
  for (const EndJobAnswer& a : answers) {
    if (!a.error.empty()) untold.push_back(a.host + " (" + a.error + ")");
  }
  DJ_LOG_INFO("MPI launcher: told {} of {} workers that the job ended{}{}",
              answers.size() - untold.size(), answers.size(),
              untold.empty() ? "" : "; not told: ",
              OneLine(absl::StrJoin(untold, ", ")));
}

}  // namespace

namespace {

// The interface through which this pod reaches the first of `hosts` (the
// workers), for Hydra's call-backs; "" when it cannot be told or is
// loopback, and Hydra then keeps its own choice.
std::string InterfaceTowardWorkers(const std::vector<std::string>& hosts) {
  if (hosts.empty()) return "";
  ResolverOptions resolver;
  resolver.pass_timeout = kProbeTimeout * 4;
  auto addresses = ResolveHost(hosts.front(), resolver);
  if (!addresses.ok() || addresses->empty()) return "";
  auto iface = RouteInterface(addresses->front());
  if (!iface.ok()) {
    DJ_LOG_DEBUG("MPI launcher: {}", iface.status().message());
    return "";
  }
  // Hydra hands the name to every proxy, which looks it up on its own
  // host: loopback there is that host's own, never the launcher.
  if (*iface == "lo") return "";
  return *iface;
}

// mpirun's process: the agent's environment, every MPI's remote launch
// through rsh, what lets the workers reach it back (MpiReachabilityEnv),
// and the written hostfile's variables when there is one.
absl::StatusOr<SpawnedProcess> StartMpirun(const RunOptions& options,
                                           const EnvMap& env,
                                           const MpiLaunchHosts& hosts,
                                           const std::string& dir,
                                           const std::string& lost_file) {
  const std::string agent = AgentPath();
  ProcessSpec spec;
  spec.argv = options.command;
  auto rsh_env = MakeRshEnv(options, env, dir);
  if (!rsh_env.ok()) return rsh_env.status();
  spec.env = *std::move(rsh_env);
  for (const auto& [name, value] :
       MpiLauncherEnv(agent, MakeRshProgram(dir, agent))) {
    if (value.empty()) continue;  // no link: Hydra keeps its own launcher
    spec.env[name] = value;
  }
  for (const auto& [name, value] :
       MpiReachabilityEnv(env, InterfaceTowardWorkers(hosts.hosts))) {
    spec.env[name] = value;
  }
  if (!lost_file.empty()) spec.env[kLostHostsFileVariable] = lost_file;
  if (MakeLink(dir, kSshShimName, agent)) {
    const std::string path = Lookup(env, "PATH").value_or("/usr/bin:/bin");
    spec.env["PATH"] = absl::StrCat(dir, ":", path);
  }
  if (hosts.from_peers) {
    auto named = WriteHostfiles(dir, hosts.hosts,
                                MpiSlotsPerHost(options.launch.nproc, env));
    if (!named.ok()) return named.status();
    for (const auto& [name, value] : *named) spec.env[name] = value;
    DJ_LOG_INFO("MPI launcher: hostfile {}/hostfile from {}", dir,
                hosts.origin);
  }
  return SpawnProcess(spec, InheritedSignalState::Capture());
}

}  // namespace

MpirunEnv PlanMpirunEnv(const RunOptions& options, const EnvMap& env,
                        const MpiLaunchHosts& hosts) {
  MpirunEnv out;
  const std::string private_dir = absl::StrCat(
      "decided at launch (", "a file in the launcher's private directory, ",
      Lookup(env, "TMPDIR").value_or("/tmp"), "/distjob-mpi-XXXXXX)");
  for (const auto& [name, value] : MpiLauncherEnv(AgentPath(), "")) {
    if (value.empty()) {
      out.undecided[name] = private_dir;
      continue;
    }
    out.env[name] = value;
    out.sources[name] = "MPI launcher: remote launch through distjob-agent rsh";
  }
  for (const auto& [name, value] : RshSettingsEnv(options)) {
    out.env[name] = value;
    out.sources[name] = "MPI launcher: rsh's setting, as the launcher has it";
  }
  out.undecided["PATH"] = absl::StrCat(
      private_dir.substr(0, private_dir.size() - 1),
      " first, where `ssh` runs as distjob-agent rsh, for launchers that run "
      "ssh themselves)");
  if (!options.security.token.empty() &&
      options.security_files.token_file.empty()) {
    out.undecided["DISTJOB_RDZV_TOKEN_FILE"] = absl::StrCat(
        private_dir.substr(0, private_dir.size() - 1),
        "; the token of DISTJOB_RDZV_TOKEN, which mpirun does not get: MPI "
        "hands its environment to every rank)");
  }
  // Those that need no interface are known now; the interface only at
  // launch (any non-empty name stands in for it here).
  const EnvMap known = MpiReachabilityEnv(env, "");
  for (const auto& [name, value] : MpiReachabilityEnv(env, "IFACE")) {
    if (known.count(name) != 0) {
      out.env[name] = value;
      out.sources[name] =
          "MPI launcher: the hostfile's names kept whole (other pods do not "
          "resolve the short ones)";
    } else {
      out.undecided[name] =
          "decided at launch (the interface that reaches the first worker "
          "host: the MPI's proxies call back to the launcher's address on "
          "it)";
    }
  }
  out.undecided[kLostHostsFileVariable] =
      absl::StrCat(private_dir.substr(0, private_dir.size() - 1),
                   "; where the launcher's rsh records a worker lost mid-job)");
  if (hosts.from_peers) {
    const int slots = MpiSlotsPerHost(options.launch.nproc, env);
    for (const auto& [name, value] : MpiHostfileEnv("", "")) {
      out.undecided[name] = absl::StrCat(
          private_dir.substr(0, private_dir.size() - 1), "; the hostfile ",
          "written from ", hosts.origin, ", ", slots, " slot(s) per host)");
    }
  }
  return out;
}

RunReport RunMpiLauncher(const RunOptions& options, const EnvMap& env,
                         const MpiPlan& plan) {
  auto hosts = MpiHosts(options.command, env, plan);
  if (!hosts.ok()) {
    DJ_LOG_ERROR("{}", OneLine(hosts.status().message()));
    return MakeRunReport("error", kExitBadConfig, 0, 0);
  }
  const sigset_t stops = SignalSet(options.supervisor.stop_signals);
  DJ_LOG_INFO("MPI launcher: waiting for the spawn servers of {} (port {})",
              hosts->hosts.empty() ? "no remote host"
                                   : absl::StrJoin(hosts->hosts, ", "),
              options.mpi.spawn_port);
  const int waited = AwaitSpawnServers(hosts->hosts, options, stops);
  if (waited > 0) {
    RunReport report =
        MakeRunReport("stopped", ExitCodeForSignal(waited), 0, 0);
    report.stop_signal = waited;
    report.detail = StoppedWhileWaiting(waited, "the spawn servers");
    return report;
  }
  if (waited < 0) {
    RunReport report =
        MakeRunReport("rendezvous", kExitRendezvousUnavailable, 0, 0);
    report.detail = "a spawn server did not answer within --spawn-wait";
    return report;
  }
  const std::string dir = MakePrivateDir();
  std::string lost_file;
  if (!dir.empty() &&
      CreateLostHostsFile(absl::StrCat(dir, "/", kLostHostsFile)).ok()) {
    lost_file = absl::StrCat(dir, "/", kLostHostsFile);
  }
  auto spawned = StartMpirun(options, env, *hosts, dir, lost_file);
  RunReport report;
  if (!spawned.ok()) {
    DJ_LOG_ERROR("MPI launcher: {}", OneLine(spawned.status().message()));
    report = MakeRunReport("error", kExitInternalError, 0, 0);
  } else if (spawned->exec_errno != 0) {
    DJ_LOG_ERROR("MPI launcher: cannot run {}: {}", options.command[0],
                 std::strerror(spawned->exec_errno));
    report = MakeRunReport("exec-failed",
                           ExecFailureExitCode(spawned->exec_errno), 0, 0);
    int status;
    waitpid(spawned->pid, &status, 0);
  } else {
    const MpirunEnd end =
        MpirunSupervision(spawned->pid, stops, lost_file).Run();
    DJ_LOG_INFO("MPI launcher: {} exited with {}", options.command[0],
                end.code);
    report = JudgeMpirunEnd(end, lost_file, *hosts, options);
  }
  // A stopped launcher is not the job's end: its pod goes, and the
  // operator decides what becomes of the job. Any other end is, mpirun's
  // failure to start included.
  if (report.stop_signal == 0) {
    TellWorkersTheJobEnded(hosts->hosts, options, report);
  }
  RemovePrivateDir(dir);
  return report;
}

}  // namespace distjob
