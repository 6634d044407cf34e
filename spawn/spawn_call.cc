#include "spawn/spawn_call.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/text.h"

namespace distjob {
namespace {

using spawn::SpawnReply;
using spawn::SpawnRequest;

// How often a pump that waits rechecks the call's cancellation.
constexpr int kTickMs = 100;

// What the two sides of a call share: the input side tells the output side
// that the caller went away (its stream ended before the exit status) by
// the flag and a write to `wake`, which the output side polls with the
// pipes.
struct CallState {
  std::atomic<bool> caller_gone{false};
  std::atomic<bool> input_done{false};
  std::atomic<bool> stop_input{false};
  int wake = -1;  // eventfd
  void Wake() {
    const uint64_t one = 1;
    // An eventfd write fails only when its counter is full: then the
    // reader is woken already.
    (void)!write(wake, &one, sizeof(one));
  }
};

// Writes all of `data` to the command's non-blocking stdin, waiting for
// room; false when the command closed it or the call is ending.
bool WriteStdin(Command* cmd, const std::string& data, CallState* state) {
  size_t off = 0;
  while (off < data.size()) {
    if (state->stop_input.load()) return false;
    const ssize_t n =
        write(cmd->stdin_fd(), data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;  // EPIPE: it stopped reading
    pollfd p{cmd->stdin_fd(), POLLOUT, 0};
    (void)poll(&p, 1, kTickMs);  // a failure only means another turn
  }
  return true;
}

// The input side, on its own thread: the caller's messages after the
// first, until its stream ends.
void PumpInput(SpawnStream* stream, Command* cmd, CallState* state) {
  SpawnRequest req;
  bool stdin_open = true;
  while (stream->Read(&req)) {
    switch (req.kind_case()) {
      case SpawnRequest::kStdinData:
        if (stdin_open && cmd->stdin_fd() >= 0 &&
            !WriteStdin(cmd, req.stdin_data(), state)) {
          cmd->CloseStdin();  // nobody reads it any more: drop what follows
          stdin_open = false;
        }
        break;
      case SpawnRequest::kStdinClose:
        cmd->CloseStdin();
        stdin_open = false;
        break;
      case SpawnRequest::kSignal:
        if (absl::Status s = cmd->Signal(req.signal()); !s.ok()) {
          DJ_LOG_WARNING("spawn: {}", OneLine(s.message()));
        }
        break;
      default:
        break;  // a second command or an empty message: nothing to do
    }
  }
  if (!state->stop_input.load()) state->caller_gone.store(true);
  state->input_done.store(true);
  state->Wake();
}

// Reads one chunk of `*fd` into a reply and writes it to the call. False
// when the call broke; closes `*fd` at its end.
bool ForwardChunk(Command* cmd, bool is_stdout, SpawnStream* stream,
                  std::string* buf) {
  const int fd = is_stdout ? cmd->stdout_fd() : cmd->stderr_fd();
  const ssize_t n = read(fd, buf->data(), buf->size());
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) {
    is_stdout ? cmd->CloseStdout() : cmd->CloseStderr();
    return true;
  }
  SpawnReply reply;
  if (is_stdout) {
    reply.set_stdout_data(buf->data(), static_cast<size_t>(n));
  } else {
    reply.set_stderr_data(buf->data(), static_cast<size_t>(n));
  }
  // Blocks while the caller's window is full: the back-pressure.
  return stream->Write(reply);
}

// The output side: until both pipes end and the shell exits, or the caller
// goes away (false then).
bool PumpOutput(SpawnCallContext* ctx, SpawnStream* stream, Command* cmd,
                CallState* state, size_t chunk) {
  std::string buf(chunk, '\0');
  while (true) {
    if (state->caller_gone.load() || ctx->IsCancelled()) return false;
    if (cmd->stdout_fd() < 0 && cmd->stderr_fd() < 0 &&
        cmd->Poll().has_value()) {
      return true;
    }
    pollfd fds[3] = {{cmd->stdout_fd(), POLLIN, 0},
                     {cmd->stderr_fd(), POLLIN, 0},
                     {state->wake, POLLIN, 0}};
    if (poll(fds, 3, kTickMs) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      if (!ForwardChunk(cmd, i == 0, stream, &buf)) return false;
    }
  }
}

SpawnReply ExitReply(const CommandExit& e) {
  SpawnReply reply;
  if (e.signaled) {
    reply.set_exit_signal(e.code);
  } else {
    reply.set_exit_status(e.code);
  }
  return reply;
}

// After the exit status: the caller closes its side, or is cut off.
void AwaitCallerClose(SpawnCallContext* ctx, CallState* state,
                      absl::Duration close_wait) {
  const absl::Time deadline = absl::Now() + close_wait;
  while (!state->input_done.load() && absl::Now() < deadline) {
    pollfd p{state->wake, POLLIN, 0};
    (void)poll(&p, 1, kTickMs);  // a tick either way
  }
  if (!state->input_done.load()) ctx->TryCancel();
}

}  // namespace

grpc::Status ServeSpawnCall(SpawnCallContext* ctx, SpawnStream* stream,
                            const CommandStarter& start, const EnvMap& env,
                            const SpawnLimits& limits) {
  SpawnRequest first;
  if (!stream->Read(&first)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "no command was sent");
  }
  if (first.kind_case() != SpawnRequest::kCommand || first.command().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message must name the command");
  }
  auto cmd = start(first.command(), env);
  if (!cmd.ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        std::string(cmd.status().message()));
  }
  DJ_LOG_INFO("spawn: {} runs {} for {}", (*cmd)->pid(),
              OneLine(first.command()), ctx->Peer());
  CallState state;
  state.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state.wake < 0) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "eventfd failed");
  }
  std::thread input(PumpInput, stream, cmd->get(), &state);
  const bool finished =
      PumpOutput(ctx, stream, cmd->get(), &state,
                 static_cast<size_t>(limits.output_chunk_bytes));
  grpc::Status result = grpc::Status::OK;
  if (finished) {
    const CommandExit e = *(*cmd)->Poll();
    (*cmd)->EndGroup(limits.kill_grace);  // what the shell left behind
    if (!stream->Write(ExitReply(e))) {
      result = grpc::Status(grpc::StatusCode::CANCELLED, "caller went away");
    }
    AwaitCallerClose(ctx, &state, limits.close_wait);
  } else {
    const pid_t pid = (*cmd)->pid();
    const CommandExit e = (*cmd)->EndGroup(limits.kill_grace);
    DJ_LOG_WARNING(
        "spawn: the caller of {} went away; its process group was ended "
        "({} {})",
        pid, e.signaled ? "signal" : "status", e.code);
    result = grpc::Status(grpc::StatusCode::CANCELLED, "caller went away");
    ctx->TryCancel();
  }
  state.stop_input.store(true);
  input.join();
  close(state.wake);
  return result;
}

}  // namespace distjob
