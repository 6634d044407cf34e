// One request to a worker's own HTTP server on the Unix socket the agent
// names in TORCH_WORKER_SERVER_SOCKET (PyTorch >= 2.4, through
// torch.distributed.elastic.control_plane.worker_main): its handlers under
// /handler/<name> (fr_trace_json, wait_counter_values, ...) answer POSTs,
// as torch's WorkerServer registers them.
//
// The worker may be hung, which is why it is asked: every step is
// non-blocking against one deadline, and the answer is cut at a bound.
#ifndef DISTJOB_SUPERVISOR_WORKER_SERVER_CLIENT_H_
#define DISTJOB_SUPERVISOR_WORKER_SERVER_CLIENT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distjob {

// The longest Unix socket path (sun_path holds 108 bytes with its NUL).
inline constexpr size_t kMaxUnixSocketPath = 107;

struct WorkerServerAnswer {
  int status = 0;          // the HTTP status code
  std::string body;        // at most max_body bytes of it
  bool truncated = false;  // the body was longer
};

// POST /handler/<handler> on `socket_path` by `deadline`. DeadlineExceeded
// when the worker does not answer in time, Unavailable when nothing
// listens, InvalidArgument for an answer that is not HTTP; each names the
// socket.
absl::StatusOr<WorkerServerAnswer> AskWorkerServer(
    const std::string& socket_path, const std::string& handler,
    absl::Time deadline, size_t max_body);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_WORKER_SERVER_CLIENT_H_
