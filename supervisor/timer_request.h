// One request of torch's FileTimer protocol
// (torch.distributed.elastic.timer.FileTimerClient): a JSON line a worker
// writes to the FIFO named by TORCHELASTIC_TIMER_FILE,
//   {"version":1,"pid":P,"scope_id":"...","expiration_time":T,"signal":N}
// where T is seconds since the epoch, and a negative T releases the timer
// (the client writes -1). Parsed here, apart from the FIFO and the table, so
// the parser of outside input is tested on its own.
#ifndef DISTJOB_SUPERVISOR_TIMER_REQUEST_H_
#define DISTJOB_SUPERVISOR_TIMER_REQUEST_H_

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {

// The client refuses requests over PIPE_BUF (so each write is atomic); the
// server refuses them too, so one writer cannot make it buffer more.
inline constexpr size_t kMaxTimerRequestBytes = 4096;

struct TimerRequest {
  pid_t pid = 0;
  std::string scope_id;
  bool release = false;  // expiration_time < 0
  absl::Time expiration = absl::InfinitePast();
  int signal = 0;  // <= 0: the expiry is logged, nothing is signalled
};

// `line` (without its newline) as a request; InvalidArgument naming what
// is wrong when it is not one: too long, not JSON, a field missing or of
// the wrong type, an unknown version, a pid <= 0, an empty scope.
absl::StatusOr<TimerRequest> ParseTimerRequest(absl::string_view line);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_TIMER_REQUEST_H_
