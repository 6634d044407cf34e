// What each client address of the workers' TCPStore holds of the store's
// shared budgets (connections, parked waits, the bytes of those waits), so
// that no address takes more than a share of any of them and, when one is
// full, what gives way is the newest of the heaviest address, never an
// established wait of a worker that holds less: one address that parked
// 28,816 waits once made every real worker's wait fail. Decides only; the
// server closes what it is told to. Not thread-safe (the server's loop).
#ifndef DISTJOB_WORKERSTORE_PEER_BUDGETS_H_
#define DISTJOB_WORKERSTORE_PEER_BUDGETS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace distjob {

class PeerBudgets {
 public:
  // One address may hold at most 1/kShare of each global budget (when its
  // own cap is not lower): a quarter, so that it takes four addresses at
  // their caps to fill one, and a fifth still gets in by eviction.
  static constexpr size_t kShare = 4;

  struct Limits {
    size_t connections = 0;
    size_t connections_per_peer = 0;
    size_t waits = 0;
    size_t waits_per_peer = 0;
    size_t wait_bytes = 0;
    size_t wait_bytes_per_peer = 0;
  };
  // Each per-peer cap cut to max(1, global / kShare).
  static Limits WithShare(Limits limits);
  // WithShare of the global budgets, each address's connections also
  // capped by `connections_per_peer`.
  static Limits Shared(size_t connections, size_t connections_per_peer,
                       size_t waits, size_t wait_bytes) {
    return WithShare({connections, connections_per_peer, waits, waits,
                      wait_bytes, wait_bytes});
  }

  struct Verdict {
    enum Kind { kAdmit, kRefuse, kEvict };
    Kind kind = kAdmit;
    // kRefuse and kEvict: which budget, for the log line.
    std::string reason;
    // kEvict: the connection to close first (then ask again): the heaviest
    // address's newest connection, or the one with its newest wait.
    uint64_t victim = 0;
  };

  explicit PeerBudgets(Limits limits) : limits_(limits) {}

  // A new connection from `ip`: over its own cap, or the global one full
  // while `ip` holds the most, refused; the global one full while another
  // address holds more, that address's newest connection gives way.
  Verdict AdmitConnection(const std::string& ip) const;
  void AddConnection(const std::string& ip, uint64_t conn);
  void RemoveConnection(const std::string& ip, uint64_t conn);

  // A new wait of `bytes` (as counted against max_waiter_bytes) from `ip`,
  // as AdmitConnection for the waits' count and bytes.
  Verdict AdmitWait(const std::string& ip, size_t bytes) const;
  // Wait ids are unique and grow (newest = largest).
  void AddWait(const std::string& ip, uint64_t conn, uint64_t wait,
               size_t bytes);
  // Unknown ids are ignored.
  void RemoveWait(uint64_t wait);

  const Limits& limits() const { return limits_; }
  size_t connections() const { return connections_; }
  size_t waits() const { return waits_.size(); }
  size_t wait_bytes() const { return wait_bytes_; }
  struct Usage {
    size_t connections = 0;
    size_t waits = 0;
    size_t wait_bytes = 0;
  };
  Usage PeerUsage(const std::string& ip) const;

 private:
  struct Wait {
    uint64_t conn = 0;
    size_t bytes = 0;
  };
  struct Peer {
    std::set<uint64_t> conns;
    std::map<uint64_t, Wait> waits;  // by id: the newest last
    size_t wait_bytes = 0;
  };
  // What a peer holds of one budget.
  using Measure = size_t (*)(const Peer&);

  // Budget full: `ip` refused if it holds as much as any other address of
  // `measure`, else the heaviest other address's newest wait or
  // connection (`wait_victim`) is named.
  Verdict Full(const std::string& ip, Measure measure, bool wait_victim,
               std::string reason) const;
  void Forget(std::unordered_map<std::string, Peer>::iterator it);

  const Limits limits_;
  // Pointer-stable: waits_ points into it.
  std::unordered_map<std::string, Peer> peers_;
  absl::flat_hash_map<uint64_t, std::pair<const std::string, Peer>*> waits_;
  size_t connections_ = 0;
  size_t wait_bytes_ = 0;
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_PEER_BUDGETS_H_
