#include "rendezvous/dynamic/node_lease.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/logging.h"

namespace distjob {

NodeLease::NodeLease(StoreInterface* store, const RdzvKeys* keys,
                     std::string node, absl::Duration lease,
                     absl::Duration interval)
    : store_(store),
      keys_(keys),
      node_(std::move(node)),
      lease_(lease),
      interval_(interval) {}

absl::Status NodeLease::Renew() {
  std::vector<std::pair<std::string, std::string>> kvs = {
      {keys_->Alive(node_), "1"}};
  uint64_t withdrawals = 0;
  {
    absl::MutexLock lock(&mu_);
    if (ask_.has_value()) kvs.emplace_back(keys_->Waiting(node_), *ask_);
    withdrawals = withdrawals_;
  }
  const absl::Time start = absl::Now();
  absl::Status s = store_->MultiSet(kvs, lease_).status();
  if (s.ok()) NoteRenewed(start);
  bool withdraw;
  {
    absl::MutexLock lock(&mu_);
    // The ask was withdrawn (its key deleted) while this wrote it again,
    // or its delete failed: deleted once more, or it would live with the
    // lease (an etcd renewal keeps a lease's keys) and the members would
    // keep seeing it.
    withdraw =
        !ask_.has_value() && ((kvs.size() > 1 && withdrawals_ != withdrawals) ||
                              withdrawal_pending_);
  }
  if (withdraw) Withdraw();
  return s;
}

bool NodeLease::Ask(std::string value) {
  absl::MutexLock lock(&mu_);
  if (ask_ == value) return false;
  ask_ = std::move(value);
  return true;
}

void NodeLease::StopAsking() {
  bool was_asking;
  {
    absl::MutexLock lock(&mu_);
    was_asking = ask_.has_value();
    ask_.reset();
    if (was_asking) ++withdrawals_;
  }
  if (was_asking) Withdraw();
}

void NodeLease::Withdraw() {
  const std::string key = keys_->Waiting(node_);
  const absl::Status s = store_->Delete({key}).status();
  absl::MutexLock lock(&mu_);
  // Asking again writes the ask anew: nothing left to delete then.
  if (s.ok() || ask_.has_value()) {
    withdrawal_pending_ = false;
    return;
  }
  if (!withdrawal_pending_) {
    DJ_LOG_WARNING(
        "rendezvous: cannot withdraw this node's ask to join ({}): {}; "
        "deleting it again at each lease renewal",
        key, s.message());
  }
  withdrawal_pending_ = true;
}

void NodeLease::NoteRenewed(absl::Time start) {
  // From before the call: the lease runs at least lease_ from here.
  absl::MutexLock lock(&mu_);
  renewed_at_ = std::max(renewed_at_, start);
}

bool NodeLease::RenewedSince(absl::Time t) const {
  absl::MutexLock lock(&mu_);
  return renewed_at_ >= t;
}

bool NodeLease::RenewedWithin(absl::Duration d) const {
  absl::MutexLock lock(&mu_);
  return absl::Now() - renewed_at_ < d;
}

absl::Time NodeLease::NextRenewal(absl::Time last_attempt) const {
  absl::MutexLock lock(&mu_);
  return std::max(renewed_at_, last_attempt) + interval_;
}

}  // namespace distjob
