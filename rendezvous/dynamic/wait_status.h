// What a rendezvous node waits for now, set by the thread that waits and
// read by another (the agent's progress lines and `status`): which wait,
// for which round, node or count, until when, and why the store is not
// reached yet.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_WAIT_STATUS_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_WAIT_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace distjob {

enum class RdzvWait {
  kNone,
  kStore,
  kJoiners,
  kLastCall,
  kNextRound,
  kDecider,
  kExitBarrier,
  kLeft,
  kEndSeen,
  kHostLeaving,
};

class WaitStatus {
 public:
  struct Snapshot {
    RdzvWait wait = RdzvWait::kNone;
    int64_t round = -1;
    std::string node;
    int size = 0;
    absl::Time until = absl::InfiniteFuture();
    std::string store_error;
  };

  // A new wait: its round, the node or count it waits for where it has one.
  void Set(RdzvWait wait, int64_t round = -1, const std::string& node = "",
           int size = 0);
  // Until when the waits last (join_timeout, exit_barrier_timeout).
  void SetUntil(absl::Time until);
  // Why the store did not answer the last read.
  void SetStoreError(const absl::Status& error);
  Snapshot Get() const;
  // The store error while the wait is for the store, else "".
  std::string StoreUnreached() const;

 private:
  mutable absl::Mutex mu_;
  Snapshot now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_WAIT_STATUS_H_
