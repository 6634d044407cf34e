// The parked WAITs of the TCPStore server (tcpstore_server.h): which waits
// miss which keys, so that a write answers exactly the waits it completes
// and visits each parked wait at most once per key it names, never all the
// waits parked on a key at every write. Not thread-safe: the server's one
// loop thread owns it.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_WAITS_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_WAITS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace distjob {

class TcpStoreWaits {
 public:
  struct Woken {
    uint64_t id = 0;
    uint64_t conn = 0;
  };

  // What a wait on `keys` holds, as counted against max_waiter_bytes: its
  // overhead and each key twice (its own list and the per-key index).
  static size_t Bytes(const std::vector<std::string>& keys);

  // Parks wait `id` of connection `conn` on `keys`: missing now, distinct,
  // at least one. Ids grow from call to call, so a key's waits are kept in
  // arrival order.
  void Park(uint64_t id, uint64_t conn, std::vector<std::string> keys);
  // `key` now exists (a set, add, ...): no wait misses it any more; the
  // waits that miss nothing now are removed and returned, oldest first.
  std::vector<Woken> Arrived(absl::string_view key);
  // One queue item under `key`: the waits that also miss other keys no
  // longer miss this one (a wait on a queue and a key completes once both
  // have come, in either order); then the item goes to one popper, the
  // oldest wait whose last missing key it is, removed and returned.
  std::optional<Woken> ArrivedOnce(absl::string_view key);
  // Forgets wait `id` (canceled, or its connection closed); unknown ids
  // are ignored.
  void Drop(uint64_t id);

  size_t size() const { return waits_.size(); }
  size_t bytes() const { return bytes_; }

 private:
  struct Wait {
    uint64_t conn = 0;
    std::vector<std::string> keys;  // as parked; see missing
    size_t missing = 0;             // of keys, not yet arrived
  };
  // A key's waits, in arrival order (ids grow), split by what its arrival
  // does to them: `last` miss only this key (it completes them), `multi`
  // miss others too. Disjoint, so that a queue item takes all of `multi`
  // and the oldest of `last` without passing the poppers still parked.
  // Sets, not lists: a client may park thousands of waits on one key, and
  // dropping one must not scan the others.
  struct KeyWaits {
    std::set<uint64_t> multi;
    std::set<uint64_t> last;
  };

  // `key` arrived for the waits in `ids` (its `multi`, out of the index):
  // each misses one key fewer, and one left with a single missing key is
  // filed under that key's `last`.
  void ArrivedFor(const std::set<uint64_t>& ids);
  // `wait` (id `id`) now misses one key: moves it from that key's `multi`
  // to its `last`.
  void OneMissing(uint64_t id, const Wait& wait);

  absl::flat_hash_map<uint64_t, Wait> waits_;
  absl::flat_hash_map<std::string, KeyWaits> by_key_;
  size_t bytes_ = 0;
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_WAITS_H_
