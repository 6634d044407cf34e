// A static multi-node job's other nodes start their workers at once, and
// torch's TCPStore client waits for node rank 0's store without a word:
// a job whose master never came up printed nothing. The watch says, once
// per progress interval, that the master does not accept connections yet
// and why, until it does (docs/rendezvous.md, "No silent wait").
#ifndef DISTJOB_RENDEZVOUS_MASTER_WATCH_H_
#define DISTJOB_RENDEZVOUS_MASTER_WATCH_H_

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/progress_log.h"

namespace distjob {

// One connection to host:port (resolved by the agent's resolver) within
// `timeout`, closed at once: OK when it was accepted, else Unavailable
// saying why ("connection refused by 10.0.0.1:29500").
absl::Status ProbeTcp(const std::string& host, int port,
                      absl::Duration timeout);

class MasterWatch {
 public:
  // Starts probing host:port on a thread of its own.
  MasterWatch(std::string host, int port,
              absl::Duration interval = ProgressInterval());
  // Stops the thread (within a probe's second).
  ~MasterWatch();
  MasterWatch(const MasterWatch&) = delete;
  MasterWatch& operator=(const MasterWatch&) = delete;

 private:
  void Loop();

  const std::string host_;
  const int port_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_MASTER_WATCH_H_
