// This client's last TTL'd write of each key, so that writing a TTL'd key
// again with the value it holds renews its lease: a keep-alive, not a put.
// Like the embedded store's renewal (store_core.cc), it wakes no watcher;
// heartbeats live under ctl/, which every node's monitor watches, so a put
// per heartbeat would wake every node on every node's heartbeat, O(N²)
// wake-ups a second, and cost etcd a lease grant, a put and a lease expiry
// per heartbeat.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_TTL_WRITES_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_TTL_WRITES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/store/etcd/keys.h"
#include "rendezvous/store/etcd/leases.h"
#include "rendezvous/store/etcd/members.h"

namespace distjob::etcd {

class TtlWrites {
 public:
  using KeyValues = std::vector<std::pair<std::string, std::string>>;

  // Each outlives this.
  TtlWrites(Members* members, Leases* leases, const Keys* keys)
      : members_(members), leases_(leases), keys_(keys) {}

  // Renews the lease of `kvs` as last written by this client with `ttl`.
  // Keys of the same write that this client has not written under that
  // lease yet (a key the heartbeat adds, a new value) are put under it in
  // the renewal's transaction: a new lease for them would cost etcd a
  // grant, a Raft commit, per node (4,096 nodes' heartbeats that add their
  // waiting key). The revision when renewed; nullopt when the keys must be
  // written with a lease of their own (first write, another TTL or lease,
  // a kept key deleted or overwritten by another client since, the lease
  // gone).
  absl::StatusOr<std::optional<int64_t>> Renew(const KeyValues& kvs,
                                               absl::Duration ttl);
  // `kvs` were written under `lease` with `ttl` (none: no longer TTL'd).
  void Note(const KeyValues& kvs, absl::Duration ttl, int64_t lease);
  // `keys` were deleted.
  void Forget(const std::vector<std::string>& keys);

 private:
  struct Write {
    std::string value;
    int64_t lease;
    int64_t ttl_seconds;
  };

  Members* const members_;
  Leases* const leases_;
  const Keys* const keys_;
  absl::Mutex mu_;
  // By full etcd key.
  std::unordered_map<std::string, Write> writes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_TTL_WRITES_H_
