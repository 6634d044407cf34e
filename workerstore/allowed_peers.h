// The TCPStore server's admission list: the client addresses it accepts
// connections from (TcpStoreServer::SetAllowedPeers). Set from any thread
// while the loop reads it at each accept; apart from the loop so that the
// server's own state keeps to the loop thread and its two other locks.
#ifndef DISTJOB_WORKERSTORE_ALLOWED_PEERS_H_
#define DISTJOB_WORKERSTORE_ALLOWED_PEERS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace distjob {

class AllowedPeers {
 public:
  // Replaces the list with `ips`, in NormalizeAddress's form; one that is
  // not a numeric address is left out with a warning. Empty: everyone.
  void Set(const std::vector<std::string>& ips);
  // Whether `ip` (NormalizeAddress's form) may connect.
  bool Admits(const std::string& ip) const;

 private:
  mutable absl::Mutex mu_;
  std::set<std::string> allowed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_ALLOWED_PEERS_H_
