#include "agent/rsh_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>

#include "agent/cli/flag_parser.h"
#include "agent/cli/mpi_flags.h"
#include "agent/cli/security_flags.h"
#include "agent/exit_codes.h"
#include "agent/mpi_lost_hosts.h"
#include "agent/rsh_args.h"
#include "common/resolver.h"
#include "common/text.h"
#include "grpcpp/grpcpp.h"
#include "proto/spawn.grpc.pb.h"
#include "spawn/spawn_client.h"

namespace distjob {
namespace {

using spawn::SpawnReply;
using spawn::SpawnRequest;
using SpawnClientStream = grpc::ClientReaderWriter<SpawnRequest, SpawnReply>;

constexpr char kUsage[] =
    "Usage: distjob-agent rsh [ssh options] [USER@]HOST COMMAND...\n\n"
    "Runs COMMAND (its words joined by spaces, as ssh does) on HOST through\n"
    "HOST's spawn server (`distjob-agent run --framework mpi --role worker`)"
    "\ninstead of sshd: MPI launchers call it as their remote shell.\n"
    "stdin, stdout and stderr are streamed; SIGINT, SIGTERM, SIGHUP and\n"
    "SIGQUIT are forwarded. Exits with the remote status, 128+N when the\n"
    "remote command died of signal N, 255 when HOST cannot be reached.\n\n"
    "ssh's options are accepted and ignored (-4 -6 -A -a -C -f -G -g -K -k\n"
    "-M -N -n -q -s -T -t -V -v -X -x -Y -y, and with a value -B -b -c -D\n"
    "-E -e -F -I -i -J -L -l -m -O -o -P -p -Q -R -S -W -w); the user is\n"
    "the spawn server's own. Read from the environment:\n"
    "  DISTJOB_SPAWN_PORT       the spawn servers' port (default 29522)\n"
    "  DISTJOB_RDZV_TOKEN_FILE  the job's token (or DISTJOB_RDZV_TOKEN)\n"
    "  DISTJOB_RDZV_TLS_CERT, _KEY, _CA, _SERVER_NAME  TLS, as for run\n";

// How long HOST has to accept the connection (operators' ssh settings use
// ConnectTimeout=10 for the same purpose).
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);
constexpr size_t kStdinChunk = 32 * 1024;
// A reply carries at most one output chunk (spawn/spawn_limits.h).
constexpr int kMaxReplyBytes = 128 * 1024;

struct RshSettings {
  MpiOptions mpi;
  StoreSecurity security;
};

// The agent's own variables, through the same flag definitions `run`
// uses: rsh's command line is ssh's, so only the environment is parsed.
absl::StatusOr<RshSettings> LoadSettings(const EnvMap& env) {
  RshSettings settings;
  StoreSecurityOptions files;
  FlagSet flags("");
  AddMpiFlags(&flags, &settings.mpi);
  AddSecurityFlags(&flags, &files);
  if (auto rest = flags.Parse({}, env); !rest.ok()) return rest.status();
  auto security = LoadSecurity(files, env);
  if (!security.ok()) return security.status();
  settings.security = *std::move(security);
  return settings;
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      (void)poll(&p, 1, 1000);  // a timeout only means another turn
    } else if (n < 0 && errno != EINTR) {
      return;  // a closed stdout drops the output, as ssh's does
    }
  }
}

// The caller's stdin and signals to the call, on their own thread, until
// `done_fd` turns readable; then the caller's side is closed.
void PumpInput(SpawnClientStream* stream, int signal_fd, int done_fd) {
  bool stdin_open = true;
  std::string buf(kStdinChunk, '\0');
  SpawnRequest req;
  while (true) {
    pollfd fds[3] = {{stdin_open ? STDIN_FILENO : -1, POLLIN, 0},
                     {signal_fd, POLLIN, 0},
                     {done_fd, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) break;
    if (fds[2].revents != 0) break;
    if (fds[1].revents != 0) {
      signalfd_siginfo si;
      if (read(signal_fd, &si, sizeof(si)) == sizeof(si)) {
        req.set_signal(static_cast<int>(si.ssi_signo));
        if (!stream->Write(req)) break;
      }
    }
    if (fds[0].revents == 0) continue;
    const ssize_t n = read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n > 0) {
      req.set_stdin_data(buf.data(), static_cast<size_t>(n));
    } else {  // end of stdin, or none (a closed fd 0)
      stdin_open = false;
      req.set_stdin_close(true);
    }
    if (!stream->Write(req)) break;
  }
  stream->WritesDone();
}

int Unreachable(const std::string& where, absl::string_view why) {
  std::fprintf(stderr, "distjob-agent rsh: %s: %s\n", where.c_str(),
               OneLine(why).c_str());
  return kRshConnectionFailed;
}

// Reads the call to its end: output to our stdout/stderr; the exit code,
// or -1 when the call ended without one.
int ReadReplies(SpawnClientStream* stream, int done_fd) {
  int code = -1;
  SpawnReply reply;
  const uint64_t one = 1;
  while (stream->Read(&reply)) {
    switch (reply.kind_case()) {
      case SpawnReply::kStdoutData:
        WriteAll(STDOUT_FILENO, reply.stdout_data());
        break;
      case SpawnReply::kStderrData:
        WriteAll(STDERR_FILENO, reply.stderr_data());
        break;
      case SpawnReply::kExitStatus:
        code = reply.exit_status() & 0xff;
        break;
      case SpawnReply::kExitSignal:
        code = ExitCodeForSignal(reply.exit_signal());
        break;
      default:
        break;
    }
    // The end is known: our side closes, so the server's ends too.
    if (code >= 0) (void)!write(done_fd, &one, sizeof(one));
  }
  return code;
}

// Whether a call that ended with `code` broke rather than was refused:
// the connection went (the worker's pod died with its agent) or the call
// outlived its keepalive.
bool IsBrokenCall(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED ||
         code == grpc::StatusCode::UNKNOWN;
}

// Unreachable, and the host recorded as lost for the launcher
// (mpi_lost_hosts.h): it waited for every spawn server before mpirun
// started, so one that is gone now went away mid-job.
int Lost(const EnvMap& env, const RshArgs& rsh, const std::string& where,
         absl::string_view why) {
  RecordLostHost(env, rsh.host, why);
  return Unreachable(where, why);
}

int RunRemote(const RshArgs& rsh, const RshSettings& settings,
              const EnvMap& env, int signal_fd) {
  const std::string where = JoinHostPort(rsh.host, settings.mpi.spawn_port);
  auto target =
      ResolveGrpcTarget(rsh.host, settings.mpi.spawn_port, kConnectTimeout);
  if (!target.ok()) return Lost(env, rsh, where, target.status().message());
  auto channel = MakeSpawnChannel(*target, settings.security, kMaxReplyBytes);
  if (!channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + kConnectTimeout))) {
    return Lost(env, rsh, where,
                "no spawn server answers (is the worker's "
                "agent running with --framework mpi?)");
  }
  auto stub = spawn::Spawner::NewStub(channel);
  grpc::ClientContext ctx;
  AddSpawnToken(&ctx, settings.security);
  auto stream = stub->Spawn(&ctx);
  SpawnRequest first;
  first.set_command(rsh.command);
  const int done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int code = -1;
  if (done_fd >= 0 && stream->Write(first)) {
    std::thread input(PumpInput, stream.get(), signal_fd, done_fd);
    code = ReadReplies(stream.get(), done_fd);
    const uint64_t one = 1;
    (void)!write(done_fd, &one, sizeof(one));  // also when the call broke
    input.join();
  }
  if (done_fd >= 0) close(done_fd);
  const grpc::Status status = stream->Finish();
  if (code >= 0) return code;
  if (status.ok()) {
    return Unreachable(where, "the call ended without an exit status");
  }
  // Only a broken call is a lost worker: one the server refused (a wrong
  // token, its 64 commands already running, a command too long) is the
  // job's configuration, and retrying the job would not mend it; it is
  // recorded as refused, for the launcher to end mpirun at once.
  if (!IsBrokenCall(status.error_code())) {
    RecordLostHost(env, rsh.host, status.error_message(), /*refused=*/true);
    return Unreachable(where, status.error_message());
  }
  return Lost(env, rsh, where, status.error_message());
}

}  // namespace

int RshCommand(const std::vector<std::string>& args, const EnvMap& env) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto rsh = ParseRshArgs(args);
  if (!rsh.ok()) {
    std::fprintf(stderr, "distjob-agent rsh: %s\n",
                 OneLine(rsh.status().message()).c_str());
    return kExitBadConfig;
  }
  auto settings = LoadSettings(env);
  if (!settings.ok()) {
    std::fprintf(stderr, "distjob-agent rsh: %s\n",
                 OneLine(settings.status().message()).c_str());
    return kExitBadConfig;
  }
  // Before gRPC starts its threads, so that none of them takes these: they
  // are read from the signalfd and forwarded.
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&forwarded, sig);
  pthread_sigmask(SIG_BLOCK, &forwarded, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill us
  const int signal_fd = signalfd(-1, &forwarded, SFD_CLOEXEC | SFD_NONBLOCK);
  const int code = RunRemote(*rsh, *settings, env, signal_fd);
  if (signal_fd >= 0) close(signal_fd);
  return code;
}

}  // namespace distjob
