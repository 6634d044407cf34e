// One launcher, always: an agent started anywhere below another agent's
// worker (a shell script, `bash -c`, `uv run`, `python -m
// torch.distributed.run`...) must not join the outer job as a node. The
// outer agent tells its workers where it listens (kOuterAgentVariable, a
// unix socket); an inner agent asks it there to step aside before it binds
// or joins anything, and takes over the outer's settings in the reply.
#ifndef DISTJOB_AGENT_OUTER_AGENT_H_
#define DISTJOB_AGENT_OUTER_AGENT_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distjob {

// Set in every worker's environment by the agent that launched it: the
// path of the outer agent's handover socket. Never a secret.
inline constexpr char kOuterAgentVariable[] = "DISTJOB_OUTER_AGENT";

// What the outer agent answers an inner agent's request.
struct HandoverReply {
  bool agreed = false;
  // Why not (agreed false): one line naming both launchers and what to
  // change.
  std::string refusal;
  // The outer's settings the inner takes over, as the variables
  // (DISTJOB_<FLAG>) its own flags default from: applied only where the
  // inner's environment does not set them, so its own flags still win.
  std::map<std::string, std::string> settings;
  // What the inner cannot keep (e.g. a token the outer read from a
  // variable: a secret never reaches a worker).
  std::vector<std::string> lost;
  // The rendezvous key namespace the inner uses (its run id + this), so
  // that the inner's round never touches the outer's, whichever comes
  // first to the store.
  std::string rdzv_key_suffix;
};

// The wire form: "ok" or "refuse REASON", then "set NAME=VALUE",
// "lost WHAT", "rdzv-key-suffix S" lines. Values are one line each.
std::string EncodeHandoverReply(const HandoverReply& reply);
absl::StatusOr<HandoverReply> ParseHandoverReply(const std::string& text);

struct RunOptions;

// The outer's settings an inner agent takes over (health and metrics ports
// and TLS, the store's token file and TLS files, the termination log and
// error file), into `reply`: settings and lost.
void AddInheritedSettings(const RunOptions& outer, HandoverReply* reply);

// Whether `pid`'s chain of parents reaches `ancestor` (read from /proc,
// at most 256 steps). The process may exit meanwhile: then false.
bool IsDescendantOf(pid_t pid, pid_t ancestor);

// The outer side: a unix socket in a private directory, served by one
// thread, one request at a time (each with a 2 s deadline and at most 256
// bytes), answered only for this process's descendants (SO_PEERCRED).
class HandoverServer {
 public:
  // Called on the server's thread with the asking process's pid.
  using Handler = std::function<HandoverReply(pid_t)>;
  static absl::StatusOr<std::unique_ptr<HandoverServer>> Start(Handler handler);
  ~HandoverServer();
  const std::string& path() const { return path_; }

 private:
  HandoverServer() = default;
  void Loop();
  void Answer(int conn);

  Handler handler_;
  std::string dir_, path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
};

// The inner side: asks the outer agent at `path` to step aside, within
// `timeout`. Unavailable: no agent listens there (a stale marker).
// Cancelled as soon as `stop_fd` (when >= 0; a signalfd of the stop
// signals, which the agent holds blocked until its supervisor reads them)
// is readable: a stop signal must not wait out the timeout.
absl::StatusOr<HandoverReply> AskOuterToStepAside(const std::string& path,
                                                  absl::Duration timeout,
                                                  int stop_fd = -1);

}  // namespace distjob

#endif  // DISTJOB_AGENT_OUTER_AGENT_H_
