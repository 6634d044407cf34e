// The etcd store's counters (StoreInterface::Add).
//
// A counter is two keys: the value everyone reads (`kv/<key>`) and its
// sequence (`ctr/<key>`), whose etcd version counts the adds of one and
// whose value is the base: the counter is base + version - 1. An add of
// one is a blind put of the sequence in a transaction (etcd applies them
// one after another), so N nodes joining at once make N writes, where a
// read and compare-and-swap of the value made O(N²) as all but one of
// each race's writers lost and retried. Its result is then written to
// the value only while no later add has committed (the sequence's
// mod_revision is still this add's), so the value never goes back. That
// write can lag, or be lost with an agent that dies between the two
// writes: every read of a counter (MultiGet, CompareSet, Append, ListPage)
// ranges the sequence in the same transaction and takes the count from it
// (ValueOf, keys.h), so reads are exact; the value is there for watchers
// and for key counts. Other deltas and the first add compare-and-swap both
// keys.
//
// A transport failure after an add committed (its answer lost) is retried
// by Members::Call at the next member: each add therefore writes a marker
// key of its own in the transaction that applies it, which requires the
// marker absent, so a retry applies nothing and finds the marker instead.
// Where the retries fail too, the add settles its outcome by writing the
// marker itself: the add can no longer apply once it exists. A marker is
// deleted again (with the value write) only when its add's transaction was
// sent once: after a transport failure an earlier attempt may still be in
// flight and commit later, and only the marker keeps it from counting
// twice, so such a marker stays until the job's lease ends (one key per
// retried add).
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_COUNTER_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_COUNTER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/store/etcd/keys.h"
#include "rendezvous/store/etcd/leases.h"
#include "rendezvous/store/etcd/members.h"

namespace distjob::etcd {

class Counter {
 public:
  // Each outlives this.
  Counter(Members* members, Leases* leases, const Keys* keys)
      : members_(members), leases_(leases), keys_(keys) {}

  // Adds `delta` to the counter `key`: its count after the add.
  // FailedPrecondition when the key holds no integer.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);

 private:
  Members* const members_;
  Leases* const leases_;
  const Keys* const keys_;
  std::atomic<uint64_t> next_add_{0};  // names each add's marker
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_COUNTER_H_
