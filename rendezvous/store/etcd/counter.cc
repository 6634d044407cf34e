#include "rendezvous/store/etcd/counter.h"

#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/backoff.h"
#include "common/logging.h"
#include "proto/etcd_rpc.grpc.pb.h"

namespace distjob::etcd {
namespace {

using etcdserverpb::Compare;

// One Add: its keys, its marker, and whether an attempt of it may still
// commit (see counter.h).
class AddCall {
 public:
  AddCall(Members* members, const Keys& keys, const std::string& key,
          int64_t delta, int64_t lease, std::string marker)
      : members_(members),
        key_(key),
        delta_(delta),
        lease_(lease),
        value_key_(keys.data + key),
        seq_(keys.counters + key),
        marker_(std::move(marker)) {}

  absl::StatusOr<int64_t> Run();

 private:
  // The compare-and-swap of both keys by delta_, and its outcome.
  struct SwapPlan {
    etcdserverpb::TxnRequest txn;
    int64_t result = 0;
    bool done = false;  // a read (delta 0): nothing to write
  };

  // An add of one as a blind put of the sequence: the count, or nullopt
  // where the counter has no sequence yet (Swap creates it).
  absl::StatusOr<std::optional<int64_t>> AddOne();
  // Writes the count of an add committed at `committed` (`result`, or read
  // as of that revision) to the value key, unless a later add did.
  absl::StatusOr<int64_t> RecordValue(int64_t committed,
                                      std::optional<int64_t> result);
  // Reads both keys and swaps them by delta_: the count, or nullopt when
  // another writer won the race.
  absl::StatusOr<std::optional<int64_t>> Swap();
  absl::StatusOr<SwapPlan> PlanSwap(const etcdserverpb::RangeResponse& counter,
                                    const etcdserverpb::RangeResponse& value);
  // The transaction that applies the add requires the marker absent and
  // writes it; its failure branch reads it (responses(0)).
  void WithMarker(etcdserverpb::TxnRequest* t) const;
  // The revision the add committed at, from a transaction WithMarker.
  static std::optional<int64_t> Marked(const etcdserverpb::TxnResponse& r);
  // After a transport failure: the revision the add committed at, or the
  // failure once the add is sure never to apply.
  absl::StatusOr<int64_t> Settle(const absl::Status& failed);
  void ForgetMarker();
  absl::Status NotInteger() const {
    return absl::FailedPreconditionError(
        absl::StrCat("key '", key_, "' does not hold an integer"));
  }

  Members* const members_;
  const std::string& key_;
  const int64_t delta_;
  const int64_t lease_;
  const std::string value_key_;
  const std::string seq_;
  const std::string marker_;
  bool retried_ = false;  // an attempt of this add may still commit
};

absl::StatusOr<int64_t> AddCall::Run() {
  // Only writers of other deltas (or the first add's creators) can lose a
  // race; they spread their retries out.
  Backoff backoff(absl::Milliseconds(5), absl::Milliseconds(200));
  for (bool first = true;; first = false) {
    if (!first) absl::SleepFor(backoff.Next());
    if (delta_ == 1) {
      auto added = AddOne();
      if (!added.ok()) return added.status();
      if (added->has_value()) return **added;
    }
    auto swapped = Swap();
    if (!swapped.ok()) return swapped.status();
    if (swapped->has_value()) return **swapped;
  }
}

absl::StatusOr<std::optional<int64_t>> AddCall::AddOne() {
  etcdserverpb::TxnRequest t;
  auto* c = t.add_compare();
  c->set_key(seq_);
  c->set_target(Compare::VERSION);
  c->set_result(Compare::GREATER);
  c->set_version(0);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(seq_);
  put->set_ignore_value(true);
  put->set_lease(lease_);
  put->set_prev_kv(true);
  WithMarker(&t);
  auto resp = members_->Txn(t, "add", &retried_);
  std::optional<int64_t> committed;
  std::optional<int64_t> result;
  if (!resp.ok()) {
    retried_ = true;
    auto at = Settle(resp.status());
    if (!at.ok()) return at.status();
    committed = *at;
  } else if (resp->succeeded()) {
    const auto& prev = resp->responses(0).response_put().prev_kv();
    int64_t base = 0;
    if (!absl::SimpleAtoi(prev.value(), &base)) return NotInteger();
    committed = resp->header().revision();
    result = base + prev.version();
  } else {
    committed = Marked(*resp);
  }
  if (!committed.has_value()) return std::nullopt;
  return RecordValue(*committed, result);
}

absl::StatusOr<int64_t> AddCall::RecordValue(int64_t committed,
                                             std::optional<int64_t> result) {
  if (!result.has_value()) {
    // Committed by an attempt whose answer was lost: the count as of
    // that commit.
    auto then = members_->Range(seq_, "", false, 0, committed);
    if (!then.ok()) return then.status();
    result = CounterOf(*then);
    if (!result.has_value()) return NotInteger();
  }
  etcdserverpb::TxnRequest w;
  auto* c = w.add_compare();
  c->set_key(seq_);
  c->set_target(Compare::MOD);
  c->set_mod_revision(committed);
  auto* put = w.add_success()->mutable_request_put();
  put->set_key(value_key_);
  put->set_value(absl::StrCat(*result));
  put->set_lease(lease_);
  if (!retried_) {
    w.add_success()->mutable_request_delete_range()->set_key(marker_);
    w.add_failure()->mutable_request_delete_range()->set_key(marker_);
  }
  // The add has happened: a failure here leaves the value behind
  // (reads take the count from the sequence) and must not make the
  // caller add again.
  if (auto s = members_->Txn(w, "add (value)"); !s.ok()) {
    DJ_LOG_WARNING("etcd add {}: {}", key_, s.status());
  }
  return *result;
}

absl::StatusOr<std::optional<int64_t>> AddCall::Swap() {
  etcdserverpb::TxnRequest read;
  read.add_success()->mutable_request_range()->set_key(seq_);
  read.add_success()->mutable_request_range()->set_key(value_key_);
  auto r = members_->Txn(read, "add (read)");
  if (!r.ok()) return r.status();
  auto plan = PlanSwap(r->responses(0).response_range(),
                       r->responses(1).response_range());
  if (!plan.ok()) return plan.status();
  if (plan->done) return plan->result;
  WithMarker(&plan->txn);
  auto resp = members_->Txn(plan->txn, "add", &retried_);
  if (!resp.ok()) {
    retried_ = true;
    auto at = Settle(resp.status());
    if (!at.ok()) return at.status();
  } else if (!resp->succeeded() && !Marked(*resp).has_value()) {
    return std::nullopt;  // lost a race: read again
  }
  ForgetMarker();
  return plan->result;
}

absl::StatusOr<AddCall::SwapPlan> AddCall::PlanSwap(
    const etcdserverpb::RangeResponse& counter,
    const etcdserverpb::RangeResponse& value) {
  SwapPlan plan;
  auto* c = plan.txn.add_compare();
  c->set_key(seq_);
  auto* put = plan.txn.add_success()->mutable_request_put();
  put->set_key(seq_);
  put->set_lease(lease_);
  if (counter.kvs_size() > 0) {
    int64_t base = 0;
    if (!absl::SimpleAtoi(counter.kvs(0).value(), &base)) return NotInteger();
    plan.result = base + counter.kvs(0).version() - 1 + delta_;
    plan.done = delta_ == 0;
    c->set_target(Compare::MOD);
    c->set_mod_revision(counter.kvs(0).mod_revision());
    // The put counts one in the version: the base takes the rest.
    put->set_value(absl::StrCat(base + delta_ - 1));
  } else {
    int64_t current = 0;
    if (value.kvs_size() > 0 &&
        !absl::SimpleAtoi(value.kvs(0).value(), &current)) {
      return NotInteger();
    }
    plan.result = current + delta_;
    plan.done = delta_ == 0 && value.kvs_size() > 0;
    c->set_target(Compare::CREATE);
    c->set_create_revision(0);
    c = plan.txn.add_compare();
    c->set_key(value_key_);
    if (value.kvs_size() > 0) {
      c->set_target(Compare::MOD);
      c->set_mod_revision(value.kvs(0).mod_revision());
    } else {
      c->set_target(Compare::CREATE);
      c->set_create_revision(0);
    }
    // Version 1: the base is the value.
    put->set_value(absl::StrCat(plan.result));
  }
  put = plan.txn.add_success()->mutable_request_put();
  put->set_key(value_key_);
  put->set_value(absl::StrCat(plan.result));
  put->set_lease(lease_);
  return plan;
}

void AddCall::WithMarker(etcdserverpb::TxnRequest* t) const {
  auto* c = t->add_compare();
  c->set_key(marker_);
  c->set_target(Compare::CREATE);
  c->set_create_revision(0);
  auto* put = t->add_success()->mutable_request_put();
  put->set_key(marker_);
  put->set_lease(lease_);
  t->add_failure()->mutable_request_range()->set_key(marker_);
}

std::optional<int64_t> AddCall::Marked(const etcdserverpb::TxnResponse& r) {
  if (r.succeeded() || r.responses_size() == 0 ||
      r.responses(0).response_range().kvs_size() == 0) {
    return std::nullopt;
  }
  return r.responses(0).response_range().kvs(0).create_revision();
}

absl::StatusOr<int64_t> AddCall::Settle(const absl::Status& failed) {
  if (failed.code() == absl::StatusCode::kCancelled) return failed;
  etcdserverpb::TxnRequest f;
  auto* c = f.add_compare();
  c->set_key(marker_);
  c->set_target(Compare::CREATE);
  c->set_create_revision(0);
  auto* put = f.add_success()->mutable_request_put();
  put->set_key(marker_);
  put->set_value("void");
  put->set_lease(lease_);
  f.add_failure()->mutable_request_range()->set_key(marker_);
  auto r = members_->Txn(f, "add (settle)");
  if (!r.ok()) {
    return absl::UnavailableError(
        absl::StrCat("etcd add to '", key_, "': outcome unknown (",
                     failed.message(), "; then ", r.status().message(), ")"));
  }
  if (auto at = Marked(*r); at.has_value()) return *at;
  return failed;
}

void AddCall::ForgetMarker() {
  if (retried_) return;
  etcdserverpb::TxnRequest t;
  t.add_success()->mutable_request_delete_range()->set_key(marker_);
  if (auto s = members_->Txn(t, "add (marker)"); !s.ok()) {
    DJ_LOG_DEBUG("etcd add {}: {}", key_, s.status());
  }
}

}  // namespace

absl::StatusOr<int64_t> Counter::Add(const std::string& key, int64_t delta) {
  auto lease = leases_->JobLease();
  if (!lease.ok()) return lease.status();
  AddCall add(members_, *keys_, key, delta, *lease,
              absl::StrCat(keys_->adds, next_add_++));
  return add.Run();
}

}  // namespace distjob::etcd
