#include "rendezvous/store/etcd/ttl_writes.h"

#include "proto/etcd_rpc.grpc.pb.h"

namespace distjob::etcd {

using etcdserverpb::Compare;

absl::StatusOr<std::optional<int64_t>> TtlWrites::Renew(const KeyValues& kvs,
                                                        absl::Duration ttl) {
  if (kvs.size() > kMaxTxnOps / 2) return std::nullopt;
  int64_t lease = 0;
  std::vector<bool> kept(kvs.size(), false);
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < kvs.size(); ++i) {
      auto it = writes_.find(keys_->data + kvs[i].first);
      if (it == writes_.end()) continue;
      if (it->second.ttl_seconds != TtlSeconds(ttl) ||
          (lease != 0 && it->second.lease != lease)) {
        return std::nullopt;
      }
      lease = it->second.lease;
      kept[i] = it->second.value == kvs[i].second;
    }
  }
  if (lease == 0) return std::nullopt;
  auto alive = leases_->KeepAlive(lease);
  if (!alive.ok()) return alive.status();
  if (!*alive) return std::nullopt;
  etcdserverpb::TxnRequest t;
  KeyValues written;
  for (size_t i = 0; i < kvs.size(); ++i) {
    const auto& [k, v] = kvs[i];
    if (!kept[i]) {
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(keys_->data + k);
      put->set_value(v);
      put->set_lease(lease);
      keys_->ForgetCounter(&t, k);
      written.push_back(kvs[i]);
      continue;
    }
    auto* c = t.add_compare();
    c->set_key(keys_->data + k);
    c->set_target(Compare::LEASE);
    c->set_lease(lease);
    c = t.add_compare();
    c->set_key(keys_->data + k);
    c->set_target(Compare::VALUE);
    c->set_value(v);
  }
  auto resp = members_->Txn(t, "renew");
  // NotFound: the lease ran out since its keep-alive.
  if (!resp.ok() && resp.status().code() == absl::StatusCode::kNotFound) {
    return std::nullopt;
  }
  if (!resp.ok()) return resp.status();
  if (!resp->succeeded()) return std::nullopt;
  if (!written.empty()) Note(written, ttl, lease);
  return resp->header().revision();
}

void TtlWrites::Note(const KeyValues& kvs, absl::Duration ttl, int64_t lease) {
  absl::MutexLock lock(&mu_);
  // A bound for a client shared by many writers (bench/store_bench.cc);
  // an agent writes a few TTL'd keys.
  if (writes_.size() > 4096) writes_.clear();
  for (const auto& [k, v] : kvs) {
    if (ttl > absl::ZeroDuration()) {
      writes_[keys_->data + k] = Write{v, lease, TtlSeconds(ttl)};
    } else {
      writes_.erase(keys_->data + k);
    }
  }
}

void TtlWrites::Forget(const std::vector<std::string>& keys) {
  absl::MutexLock lock(&mu_);
  for (const auto& k : keys) writes_.erase(keys_->data + k);
}

}  // namespace distjob::etcd
