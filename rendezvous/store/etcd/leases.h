// The etcd client's leases. Keys written without a TTL hang on one
// job-wide lease that every agent of the job keeps alive, each also
// registered as a holder under a lease of its own; the last holder out
// revokes the job lease (EtcdStore::Close), deleting the job's keys. Keys
// written with a TTL get a fresh lease per write (LeaseFor).
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_LEASES_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_LEASES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/store/etcd/calls.h"
#include "rendezvous/store/etcd/hooks.h"
#include "rendezvous/store/etcd/keepalive.h"
#include "rendezvous/store/etcd/members.h"

namespace distjob::etcd {

class Leases {
 public:
  // `members`, `calls` and `hooks` outlive this; `meta` is the run's
  // agent/ prefix (Keys::meta).
  Leases(Members* members, InFlightCalls* calls, std::string meta,
         absl::Duration session_ttl, const Hooks* hooks);

  // The job lease, adopted (found or created, this client registered as
  // a holder, kept alive) on first use.
  absl::StatusOr<int64_t> JobLease();
  // The lease for a write of `ttl`: the job lease without one, a fresh
  // lease otherwise.
  absl::StatusOr<int64_t> LeaseFor(absl::Duration ttl);
  // The job lease if adopted, else 0.
  int64_t CurrentJobLease();

  // One keep-alive of lease `id`; false when etcd no longer knows it.
  absl::StatusOr<bool> KeepAlive(int64_t id) { return renewals_.KeepAlive(id); }
  absl::StatusOr<int64_t> Grant(absl::Duration ttl);
  // A goodbye: a lease not revoked expires after its TTL.
  void Revoke(int64_t id);
  // Seconds left on lease `id` (<= 0: gone) and the TTL it was granted.
  absl::StatusOr<std::pair<int64_t, int64_t>> TimeToLive(int64_t id);

  // Closing, in two steps around the cancelling of the calls in flight:
  // Begin (false: closed already) stops adoptions and the keeper; Finish
  // waits for an adoption under way, stops keeping leases alive, revokes
  // this client's own leases and returns the job lease (0: none).
  bool BeginClose();
  int64_t FinishClose();

 private:
  // One adoption per client at a time (JobLease).
  absl::StatusOr<int64_t> AdoptJobLease();
  // Makes sure the job's lease record names a live lease.
  absl::Status EnsureJobLeaseRecord();
  void KeepAliveLoop();

  Members* const members_;
  const std::string meta_;
  const absl::Duration session_ttl_;
  const Hooks* const hooks_;
  KeepAliveStream renewals_;

  absl::Mutex mu_;
  int64_t job_lease_ ABSL_GUARDED_BY(mu_) = 0;
  // A JobLease adoption is in flight; `adoptions_` counts those that
  // ended, the last failed one with `adoption_error_`.
  bool adopting_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t adoptions_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status adoption_error_ ABSL_GUARDED_BY(mu_);
  // When that failed adoption's own caller's deadline fell, if it ended
  // past it (InfiniteFuture: it failed on its own): a waiter with more
  // time adopts again rather than take a failure that was only the
  // adopter's lack of time.
  absl::Time adoption_cut_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool adoption_failed_ ABSL_GUARDED_BY(mu_) = false;  // the last one
  int64_t own_lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> ttl_leases_ ABSL_GUARDED_BY(mu_);
  // ttl_leases_ as BeginClose found them: revoked by FinishClose.
  std::vector<int64_t> ttl_at_close_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar stop_cv_;
  std::thread keeper_ ABSL_GUARDED_BY(mu_);
};

// TTL'd writes get leases that are never renewed but by Renew, so one
// look-up per lease gives its expiry until then: listings cost one RPC per
// new heartbeat, not one per key per listing.
class LeaseAges {
 public:
  struct Info {
    absl::Time expires;  // on this process' clock, from etcd's remaining TTL
    absl::Duration granted;
  };
  explicit LeaseAges(Leases* leases) : leases_(leases) {}
  // Lease `id`'s expiry and granted TTL; nullopt when etcd does not say.
  std::optional<Info> Of(int64_t id);

 private:
  Leases* const leases_;
  absl::Mutex mu_;
  std::unordered_map<int64_t, Info> info_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_LEASES_H_
