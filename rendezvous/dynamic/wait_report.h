// What a DynamicRendezvous node says it waits for (rendezvous.h's
// WaitingFor and WaitProgress, read by the agent's progress lines and
// `status`), from its wait status and a few short reads, and the
// addresses it last saw in a round (LastSeenAddrs), which those reads and
// the join's own refresh.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_WAIT_REPORT_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_WAIT_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "rendezvous/dynamic/exit_barrier.h"
#include "rendezvous/dynamic/round_monitor.h"
#include "rendezvous/dynamic/wait_status.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class WaitReport {
 public:
  // What it uses of the facade; every pointer outlives it.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    int min_nodes = 1;
    int max_nodes = 1;
    const WaitStatus* wait_status = nullptr;
    // The round held, and its members not finished, for the exit
    // barrier's line.
    const RoundMonitor* monitor = nullptr;
    ExitBarrier* exit = nullptr;
  };

  explicit WaitReport(Deps deps);
  WaitReport(const WaitReport&) = delete;
  WaitReport& operator=(const WaitReport&) = delete;

  // What this node waits for, in a few words ("": nothing).
  std::string WaitingFor();
  // WaitingFor with who is missing and until when.
  std::string WaitProgress();
  // Replaces the addresses last seen with those of open round `round`'s
  // joiners (an open round's state does not hold them).
  void NoteJoinedAddrs(int64_t round);
  // Replaces the addresses last seen.
  void SetLastSeen(std::vector<std::string> addrs);
  std::vector<std::string> LastSeenAddrs() const;

 private:
  const Deps d_;
  mutable absl::Mutex mu_;
  std::vector<std::string> last_seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_WAIT_REPORT_H_
