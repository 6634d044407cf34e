// The job's namespace in etcd, and what every part of the client reads it
// with: range ends, transaction chunks, and a counter's count (counter.h).
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_KEYS_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_KEYS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/etcd_rpc.pb.h"

namespace distjob::etcd {

// The keys of one run (`<prefix>/<run_id>/`).
struct Keys {
  Keys(const std::string& prefix, const std::string& run_id);

  std::string data;  // <prefix>/<run_id>/kv/
  std::string meta;  // <prefix>/<run_id>/agent/
  // <prefix>/<run_id>/ctr/: the sequences of Add's counters, outside kv/
  // so that no listing or watch of the store's keys sees them.
  std::string counters;
  // <prefix>/<run_id>/agent/adds/<this client's random id>/: each add's
  // marker (see counter.h), so a retried add counts once.
  std::string adds;

  // A key written otherwise than by Add stops being a counter: its next
  // Add starts from the value written (see counter.h).
  void ForgetCounter(etcdserverpb::TxnRequest* t, const std::string& key) const;
};

// The smallest key greater than every key that starts with `prefix`, as
// etcd's range_end wants it ("\0" means: to the end of the keyspace).
std::string PrefixEnd(const std::string& prefix);

// etcd refuses a transaction of more operations than its --max-txn-ops
// (default 128); a request of more keys is split into transactions of
// this many, each atomic on its own.
inline constexpr size_t kMaxTxnOps = 128;

// Runs `txn` on [first, last) slices of `n` items, `per_txn` at a time
// (kMaxTxnOps / operations per item).
template <typename F>
absl::Status ForEachTxnChunk(size_t n, F txn, size_t per_txn = kMaxTxnOps) {
  for (size_t first = 0; first < n || first == 0; first += per_txn) {
    if (absl::Status s = txn(first, std::min(n, first + per_txn)); !s.ok()) {
      return s;
    }
    if (n == 0) break;
  }
  return absl::OkStatus();
}

// A lease TTL in etcd's whole seconds, at least one.
int64_t TtlSeconds(absl::Duration d);

// A counter's count from its sequence key (see counter.h):
// base + version - 1.
std::optional<int64_t> CounterOf(const mvccpb::KeyValue& seq);
std::optional<int64_t> CounterOf(const etcdserverpb::RangeResponse& seq);

// What a reader sees of a key, from the ranges of its value (`kv/<key>`)
// and its sequence (`ctr/<key>`) read in one transaction: a counter's value
// write lags its adds (and is lost with an adder that dies between its two
// writes), the sequence never does.
std::optional<std::string> ValueOf(const etcdserverpb::RangeResponse& value,
                                   const etcdserverpb::RangeResponse& seq);

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_KEYS_H_
