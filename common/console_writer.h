// Writes to the agent's own stdout and stderr without ever blocking for
// long: in a pod they are pipes to the container runtime, and a reader that
// went away (EPIPE) or stopped reading (a full pipe) must neither stop
// supervision nor keep the agent alive past its grace period. The agent's
// log and the workers' --tee copies share one writer per stream, so a
// stall seen by one is known to all.
#ifndef DISTJOB_COMMON_CONSOLE_WRITER_H_
#define DISTJOB_COMMON_CONSOLE_WRITER_H_

#include <mutex>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {

// How long a write waits for a reader that takes nothing. At most a second,
// so a stop signal is still handled within one.
inline constexpr absl::Duration kConsoleStallLimit = absl::Seconds(1);

class ConsoleWriter {
 public:
  enum class Result {
    kWritten,  // all of it
    kStalled,  // the reader took nothing for the stall limit: rest dropped
    kGone,     // the reader is gone (EPIPE) or the fd is unusable
  };

  // The process-wide writer for fd 1 or 2 (created on first use).
  static ConsoleWriter& Stdout();
  static ConsoleWriter& Stderr();

  // Writes to `fd` (not owned); `stall_limit` as above.
  ConsoleWriter(int fd, absl::Duration stall_limit);
  ~ConsoleWriter();
  ConsoleWriter(const ConsoleWriter&) = delete;
  ConsoleWriter& operator=(const ConsoleWriter&) = delete;

  // Writes `data` whole unless the reader is gone (then nothing is ever
  // written again) or takes nothing for the stall limit (the rest is
  // dropped, and until a write succeeds again later ones try once without
  // waiting). Thread-safe; one call's bytes are not interleaved with
  // another's.
  Result Write(absl::string_view data);

 private:
  // One attempt; >= 0 bytes written, or -errno.
  long WriteSome(const char* data, size_t size);

  std::mutex mu_;
  const int fd_;
  int nonblocking_fd_ = -1;  // an own open file description of a FIFO
  bool socket_ = false;
  bool fifo_ = false;
  const absl::Duration stall_limit_;
  bool gone_ = false;
  bool stalled_ = false;
};

}  // namespace distjob

#endif  // DISTJOB_COMMON_CONSOLE_WRITER_H_
