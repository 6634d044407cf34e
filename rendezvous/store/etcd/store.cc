#include "rendezvous/store/etcd/store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/calls.h"
#include "rendezvous/store/etcd/counter.h"
#include "rendezvous/store/etcd/hooks.h"
#include "rendezvous/store/etcd/keys.h"
#include "rendezvous/store/etcd/leases.h"
#include "rendezvous/store/etcd/members.h"
#include "rendezvous/store/etcd/ttl_writes.h"
#include "rendezvous/store/etcd/watch.h"
#include "rendezvous/store/pem_files.h"

namespace distjob {
namespace {

using etcd::kMaxTxnOps;
using etcd::PrefixEnd;
using etcdserverpb::Compare;

// Read and parsed here, at start: a file that is not PEM would otherwise
// only show as handshakes failing until the join timeout.
absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  const std::string flag = absl::StrCat("--rdzv-conf ", what);
  return what == "key" ? ReadPemPrivateKey(flag, path)
                       : ReadPemCertificates(flag, path);
}

// TLS when ca_cert or cert is set, plaintext otherwise.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsFor(
    const EtcdStoreOptions& options) {
  if (options.ca_cert.empty() && options.cert.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.ca_cert.empty()) {
    auto ca = ReadPem(options.ca_cert, "ca_cert");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (!options.cert.empty()) {
    auto cert = ReadPem(options.cert, "cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadPem(options.key, "key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

// The parts, in the order they are built (each refers to those before it).
struct EtcdStore::Impl {
  Impl(EtcdStoreOptions o, std::shared_ptr<grpc::ChannelCredentials> creds,
       etcd::Hooks h)
      : options(std::move(o)),
        hooks(std::move(h)),
        keys(options.prefix, options.run_id),
        members(options.endpoints, std::move(creds), options.rpc_timeout,
                &calls, &hooks),
        leases(&members, &calls, keys.meta, options.session_ttl, &hooks),
        lease_ages(&leases),
        ttl_writes(&members, &leases, &keys),
        watcher(&members, &calls),
        counter(&members, &leases, &keys) {}

  // What a listing shows of a TTL'd key's age and time left: every TTL'd
  // write gets a fresh lease, so the lease's age is the key's age on
  // etcd's clock (to the second).
  void FillAge(int64_t lease, int64_t job, StoreEntry* e) {
    if (lease == 0 || lease == job) return;
    std::optional<etcd::LeaseAges::Info> info = lease_ages.Of(lease);
    if (!info.has_value()) return;
    e->ttl_left = std::max(absl::ZeroDuration(), info->expires - absl::Now());
    e->age = std::max(absl::ZeroDuration(), info->granted - e->ttl_left);
  }

  const EtcdStoreOptions options;
  const etcd::Hooks hooks;
  const etcd::Keys keys;
  etcd::InFlightCalls calls;
  etcd::Members members;
  etcd::Leases leases;
  etcd::LeaseAges lease_ages;
  etcd::TtlWrites ttl_writes;
  etcd::Watcher watcher;
  etcd::Counter counter;
};

EtcdStore::EtcdStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EtcdStore::~EtcdStore() { Close(); }

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Connect(
    EtcdStoreOptions options) {
  return ConnectWithHooks(std::move(options), etcd::Hooks{});
}

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::ConnectWithHooks(
    EtcdStoreOptions options, etcd::Hooks hooks) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("--rdzv-endpoint: no etcd endpoint");
  }
  auto creds = CredentialsFor(options);
  if (!creds.ok()) return creds.status();
  auto impl = std::make_unique<Impl>(std::move(options), *std::move(creds),
                                     std::move(hooks));
  return std::unique_ptr<EtcdStore>(new EtcdStore(std::move(impl)));
}

void EtcdStore::Close() {
  if (!impl_->leases.BeginClose()) return;
  impl_->calls.CancelAll();
  const int64_t job = impl_->leases.FinishClose();
  // Later calls, from any thread, fail at once.
  absl::Cleanup done = [this] { impl_->calls.EndClose(); };
  if (job == 0) return;
  const std::string holders = impl_->keys.meta + "holders/";
  auto count = impl_->members.Range(holders, PrefixEnd(holders), true);
  if (count.ok() && count->count() == 0) {
    DJ_LOG_INFO("last agent of run {} out: revoking its etcd keys",
                impl_->options.run_id);
    impl_->leases.Revoke(job);
  }
}

absl::Status EtcdStore::WaitUntilReachable(absl::Duration timeout) {
  etcdserverpb::RangeRequest req;
  req.set_key(impl_->keys.meta + "lease");
  etcdserverpb::RangeResponse resp;
  return impl_->members.Call(
      "range", timeout, [&](const etcd::Stubs& s, grpc::ClientContext* ctx) {
        return s.kv->Range(ctx, req, &resp);
      });
}

absl::StatusOr<int64_t> EtcdStore::MultiSet(
    const std::vector<std::pair<std::string, std::string>>& kvs,
    absl::Duration ttl) {
  if (ttl > absl::ZeroDuration()) {
    auto renewed = impl_->ttl_writes.Renew(kvs, ttl);
    if (!renewed.ok()) return renewed.status();
    if (renewed->has_value()) return **renewed;
  }
  auto lease = impl_->leases.LeaseFor(ttl);
  if (!lease.ok()) return lease.status();
  int64_t revision = 0;
  auto s = etcd::ForEachTxnChunk(
      kvs.size(),
      [&](size_t first, size_t last) {
        etcdserverpb::TxnRequest t;
        for (size_t i = first; i < last; ++i) {
          auto* put = t.add_success()->mutable_request_put();
          put->set_key(impl_->keys.data + kvs[i].first);
          put->set_value(kvs[i].second);
          put->set_lease(*lease);
          impl_->keys.ForgetCounter(&t, kvs[i].first);
        }
        auto resp = impl_->members.Txn(t, "set");
        if (!resp.ok()) return resp.status();
        revision = resp->header().revision();
        return absl::OkStatus();
      },
      kMaxTxnOps / 2);
  if (!s.ok()) return s;
  impl_->ttl_writes.Note(kvs, ttl, *lease);
  return revision;
}

absl::StatusOr<std::vector<std::string>> EtcdStore::MultiGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string& data = impl_->keys.data;
  std::string common = keys.empty() ? "" : keys[0];
  for (const auto& k : keys) {
    size_t n = 0;
    while (n < common.size() && n < k.size() && common[n] == k[n]) ++n;
    common.resize(n);
  }
  for (;;) {
    std::vector<std::string> values;
    std::vector<std::string> missing;
    // The watch below starts after the first slice's revision, so a key
    // written while later slices were read is not missed.
    int64_t revision = -1;
    auto s = etcd::ForEachTxnChunk(
        keys.size(),
        [&](size_t first, size_t last) {
          etcdserverpb::TxnRequest t;
          for (size_t i = first; i < last; ++i) {
            // With its counter's sequence, if any (ValueOf).
            t.add_success()->mutable_request_range()->set_key(data + keys[i]);
            t.add_success()->mutable_request_range()->set_key(
                impl_->keys.counters + keys[i]);
          }
          auto resp = impl_->members.Txn(t, "get");
          if (!resp.ok()) return resp.status();
          if (revision < 0) revision = resp->header().revision();
          for (int i = 0; i + 1 < resp->responses_size(); i += 2) {
            auto v = etcd::ValueOf(resp->responses(i).response_range(),
                                   resp->responses(i + 1).response_range());
            if (!v.has_value()) {
              missing.push_back(keys[first + i / 2]);
            } else {
              values.push_back(*std::move(v));
            }
          }
          return absl::OkStatus();
        },
        kMaxTxnOps / 2);
    if (!s.ok()) return s;
    if (missing.empty()) return values;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      const std::string list = absl::StrJoin(missing, " ");
      if (timeout <= absl::ZeroDuration()) {
        return absl::NotFoundError(absl::StrCat("keys not found: ", list));
      }
      return absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for keys: ", list));
    }
    auto w = impl_->watcher.Watch({{data + common, PrefixEnd(data + common)}},
                                  revision, left);
    if (!w.ok()) return w.status();
  }
}

absl::StatusOr<int64_t> EtcdStore::Add(const std::string& key, int64_t delta) {
  return impl_->counter.Add(key, delta);
}

absl::StatusOr<CompareSetResult> EtcdStore::CompareSet(
    const std::string& key, const std::string& expected,
    const std::string& desired) {
  auto lease = impl_->leases.JobLease();
  if (!lease.ok()) return lease.status();
  const std::string k = impl_->keys.data + key;
  const std::string seq = impl_->keys.counters + key;
  for (;;) {
    // A plain key in one transaction: the compare holds only while the key
    // is no counter.
    etcdserverpb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(k);
    if (expected.empty()) {
      // TCPStore semantics: an empty expectation means "not there yet".
      c->set_target(Compare::CREATE);
      c->set_create_revision(0);
    } else {
      c->set_target(Compare::VALUE);
      c->set_value(expected);
    }
    c = t.add_compare();
    c->set_key(seq);
    c->set_target(Compare::CREATE);
    c->set_create_revision(0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value(desired);
    put->set_lease(*lease);
    t.add_failure()->mutable_request_range()->set_key(k);
    t.add_failure()->mutable_request_range()->set_key(seq);
    auto resp = impl_->members.Txn(t, "compare-set");
    if (!resp.ok()) return resp.status();
    CompareSetResult result;
    if (resp->succeeded()) {
      result.swapped = true;
      result.value = desired;
      return result;
    }
    const auto& value = resp->responses(0).response_range();
    const auto& counter = resp->responses(1).response_range();
    std::optional<std::string> now = etcd::ValueOf(value, counter);
    if (counter.kvs_size() == 0 || !now.has_value()) {
      result.value = now.value_or(expected);
      return result;
    }
    // A counter: compared with its exact count, swapped while its sequence
    // is unchanged (every write that changes the count writes or deletes
    // the sequence).
    if (expected.empty() || *now != expected) {
      result.value = *now;
      return result;
    }
    etcdserverpb::TxnRequest swap;
    c = swap.add_compare();
    c->set_key(seq);
    c->set_target(Compare::MOD);
    c->set_mod_revision(counter.kvs(0).mod_revision());
    put = swap.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value(desired);
    put->set_lease(*lease);
    impl_->keys.ForgetCounter(&swap, key);
    auto swapped = impl_->members.Txn(swap, "compare-set");
    if (!swapped.ok()) return swapped.status();
    if (swapped->succeeded()) {
      result.swapped = true;
      result.value = desired;
      return result;
    }
  }
}

absl::StatusOr<int64_t> EtcdStore::Append(const std::string& key,
                                          const std::string& value) {
  auto job = impl_->leases.JobLease();
  if (!job.ok()) return job.status();
  const std::string k = impl_->keys.data + key;
  const std::string seq = impl_->keys.counters + key;
  for (;;) {
    etcdserverpb::TxnRequest read;
    read.add_success()->mutable_request_range()->set_key(k);
    read.add_success()->mutable_request_range()->set_key(seq);
    auto got = impl_->members.Txn(read, "append (read)");
    if (!got.ok()) return got.status();
    const auto& r = got->responses(0).response_range();
    const auto& counter = got->responses(1).response_range();
    etcdserverpb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(k);
    std::string data = etcd::ValueOf(r, counter).value_or("");
    int64_t lease = *job;
    if (r.kvs_size() == 0) {
      c->set_target(Compare::CREATE);
      c->set_create_revision(0);
    } else {
      c->set_target(Compare::MOD);
      c->set_mod_revision(r.kvs(0).mod_revision());
      // Appending keeps the key's lease, as the embedded store keeps its TTL.
      if (r.kvs(0).lease() != 0) lease = r.kvs(0).lease();
    }
    // A counter's count changes only with its sequence.
    c = t.add_compare();
    c->set_key(seq);
    c->set_target(Compare::MOD);
    c->set_mod_revision(counter.kvs_size() > 0 ? counter.kvs(0).mod_revision()
                                               : 0);
    data += value;
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value(data);
    put->set_lease(lease);
    impl_->keys.ForgetCounter(&t, key);
    auto resp = impl_->members.Txn(t, "append");
    if (!resp.ok()) return resp.status();
    if (resp->succeeded()) return static_cast<int64_t>(data.size());
  }
}

absl::StatusOr<bool> EtcdStore::Check(const std::vector<std::string>& keys) {
  bool all = true;
  auto s = etcd::ForEachTxnChunk(keys.size(), [&](size_t first, size_t last) {
    if (!all) return absl::OkStatus();
    etcdserverpb::TxnRequest t;
    for (size_t i = first; i < last; ++i) {
      auto* r = t.add_success()->mutable_request_range();
      r->set_key(impl_->keys.data + keys[i]);
      r->set_count_only(true);
    }
    auto resp = impl_->members.Txn(t, "check");
    if (!resp.ok()) return resp.status();
    for (const auto& r : resp->responses()) {
      if (r.response_range().count() == 0) all = false;
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return all;
}

absl::StatusOr<int64_t> EtcdStore::Delete(
    const std::vector<std::string>& keys) {
  impl_->ttl_writes.Forget(keys);
  int64_t deleted = 0;
  auto s = etcd::ForEachTxnChunk(
      keys.size(),
      [&](size_t first, size_t last) {
        etcdserverpb::TxnRequest t;
        for (size_t i = first; i < last; ++i) {
          t.add_success()->mutable_request_delete_range()->set_key(
              impl_->keys.data + keys[i]);
          impl_->keys.ForgetCounter(&t, keys[i]);
        }
        auto resp = impl_->members.Txn(t, "delete");
        if (!resp.ok()) return resp.status();
        // Every other answer is a counter's sequence.
        for (int i = 0; i < resp->responses_size(); i += 2) {
          deleted += resp->responses(i).response_delete_range().deleted();
        }
        return absl::OkStatus();
      },
      kMaxTxnOps / 2);
  if (!s.ok()) return s;
  return deleted;
}

absl::StatusOr<int64_t> EtcdStore::NumKeys() {
  auto r =
      impl_->members.Range(impl_->keys.data, PrefixEnd(impl_->keys.data), true);
  if (!r.ok()) return r.status();
  return r->count();
}

absl::StatusOr<StoreListing> EtcdStore::ListPage(const std::string& prefix,
                                                 const std::string& start_after,
                                                 size_t limit) {
  // From the key after `start_after` (itself followed by a NUL byte). etcd
  // pages by `limit` itself (0: the whole range, its own page).
  const std::string from = start_after.empty() || start_after < prefix
                               ? prefix
                               : start_after + std::string(1, '\0');
  etcdserverpb::TxnRequest t;
  auto* keys = t.add_success()->mutable_request_range();
  keys->set_key(impl_->keys.data + from);
  keys->set_range_end(PrefixEnd(impl_->keys.data + prefix));
  keys->set_limit(static_cast<int64_t>(
      std::min<size_t>(limit, std::numeric_limits<int64_t>::max())));
  // The counters' sequences of the same span: a counter's value write lags
  // its adds (ValueOf). There are few counters: the whole span.
  auto* seqs = t.add_success()->mutable_request_range();
  seqs->set_key(impl_->keys.counters + from);
  seqs->set_range_end(PrefixEnd(impl_->keys.counters + prefix));
  auto resp = impl_->members.Txn(t, "list");
  if (!resp.ok()) return resp.status();
  const auto* r = &resp->responses(0).response_range();
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& seq : resp->responses(1).response_range().kvs()) {
    if (auto n = etcd::CounterOf(seq); n.has_value()) {
      counts[seq.key().substr(impl_->keys.counters.size())] = *n;
    }
  }
  const int64_t job = impl_->leases.CurrentJobLease();
  StoreListing out;
  out.revision = resp->header().revision();
  out.more = r->more();
  for (const auto& kv : r->kvs()) {
    StoreEntry e;
    e.key = kv.key().substr(impl_->keys.data.size());
    auto count = counts.find(e.key);
    e.value = count == counts.end() ? kv.value() : absl::StrCat(count->second);
    e.revision = kv.mod_revision();
    impl_->FillAge(kv.lease(), job, &e);
    out.entries.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<WatchResult> EtcdStore::WatchAny(
    const std::vector<std::string>& prefixes, int64_t after_revision,
    absl::Duration timeout) {
  if (prefixes.empty()) {
    return absl::InvalidArgumentError("a watch needs at least one prefix");
  }
  // etcd batches events and numbers a transaction's keys alike: what
  // changed is not told (WatchResult::change stays unset).
  std::vector<std::pair<std::string, std::string>> ranges;
  for (const std::string& prefix : prefixes) {
    const std::string p = impl_->keys.data + prefix;
    ranges.emplace_back(p, PrefixEnd(p));
  }
  WatchResult out;
  if (timeout <= absl::ZeroDuration()) {
    // No time to open a watch: answer from a read (a deletion since
    // `after_revision` shows only as a later revision of another key).
    for (const auto& [key, end] : ranges) {
      auto r = impl_->members.Range(key, end);
      if (!r.ok()) return r.status();
      for (const auto& kv : r->kvs()) {
        out.changed = out.changed || kv.mod_revision() > after_revision;
      }
      out.revision = std::max(out.revision, r->header().revision());
    }
    return out;
  }
  auto w = impl_->watcher.Watch(ranges, after_revision, timeout);
  if (!w.ok()) return w.status();
  out.changed = w->first;
  out.revision = w->second;
  return out;
}

}  // namespace distjob
