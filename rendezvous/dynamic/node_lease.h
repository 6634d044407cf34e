// This node's lease in the rendezvous store and its ask to join the next
// round: the keys a heartbeat renews (rdzv_keys.h: alive/<node> and, while
// this node waits outside a round, waiting/<node>), and when the lease was
// last renewed. DynamicRendezvous' heartbeat thread and its joins share it.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_NODE_LEASE_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_NODE_LEASE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class NodeLease {
 public:
  // `store` and `keys` outlive this. `lease`: how long a renewal keeps the
  // keys; `interval`: how often the lease is renewed.
  NodeLease(StoreInterface* store, const RdzvKeys* keys, std::string node,
            absl::Duration lease, absl::Duration interval);

  // Writes the alive key, and the ask while there is one, with the lease.
  absl::Status Renew();
  // Asks to join with `value` (the round this node waits after and how it
  // stopped taking nodes); true when that changed the ask, which is then
  // to be written: renewing the same value wakes nobody.
  bool Ask(std::string value);
  // Withdraws the ask, if there is one (deletes its key).
  void StopAsking();

  // A renewal that began at `start` succeeded (also a join's, which writes
  // with the lease).
  void NoteRenewed(absl::Time start);
  // Whether a renewal that began at or after `t` succeeded.
  bool RenewedSince(absl::Time t) const;
  // Whether a renewal that began less than `d` ago succeeded.
  bool RenewedWithin(absl::Duration d) const;
  // When the lease is renewed next: one interval after the last renewal,
  // or after `last_attempt` (a failed one) if that is later.
  absl::Time NextRenewal(absl::Time last_attempt) const;

 private:
  // Deletes the ask's key; a failed delete is said once and left to the
  // next renewal (withdrawal_pending_).
  void Withdraw();

  StoreInterface* const store_;
  const RdzvKeys* const keys_;
  const std::string node_;
  const absl::Duration lease_;
  const absl::Duration interval_;

  mutable absl::Mutex mu_;
  absl::Time renewed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // The ask's value while this node asks to join (unset: it does not).
  std::optional<std::string> ask_ ABSL_GUARDED_BY(mu_);
  // Asks withdrawn: a renewal that wrote the key while one was withdrawn
  // deletes it again.
  uint64_t withdrawals_ ABSL_GUARDED_BY(mu_) = 0;
  // A withdrawal whose delete failed: the ask would live as long as the
  // lease (an etcd renewal keeps a lease's keys), so each renewal deletes
  // it again until one succeeds.
  bool withdrawal_pending_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_NODE_LEASE_H_
