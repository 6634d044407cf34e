#include "rendezvous/store/etcd/leases.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/keys.h"
#include "rendezvous/store/store_interface.h"

namespace distjob::etcd {

using etcdserverpb::Compare;

Leases::Leases(Members* members, InFlightCalls* calls, std::string meta,
               absl::Duration session_ttl, const Hooks* hooks)
    : members_(members),
      meta_(std::move(meta)),
      session_ttl_(session_ttl),
      hooks_(hooks),
      renewals_(members, calls) {}

absl::StatusOr<int64_t> Leases::Grant(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(TtlSeconds(ttl));
  etcdserverpb::LeaseGrantResponse resp;
  auto s = members_->Call("lease grant", members_->rpc_timeout(),
                          [&](const Stubs& stubs, grpc::ClientContext* ctx) {
                            return stubs.lease->LeaseGrant(ctx, req, &resp);
                          });
  if (!s.ok()) return s;
  if (!resp.error().empty()) {
    return absl::UnavailableError(
        absl::StrCat("etcd lease grant: ", resp.error()));
  }
  return resp.id();
}

void Leases::Revoke(int64_t id) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(id);
  etcdserverpb::LeaseRevokeResponse resp;
  // A goodbye: a lease not revoked expires after its TTL.
  (void)members_->Call("lease revoke", absl::Seconds(5),
                       [&](const Stubs& stubs, grpc::ClientContext* ctx) {
                         return stubs.lease->LeaseRevoke(ctx, req, &resp);
                       });
}

absl::StatusOr<std::pair<int64_t, int64_t>> Leases::TimeToLive(int64_t id) {
  etcdserverpb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  etcdserverpb::LeaseTimeToLiveResponse resp;
  auto s =
      members_->Call("lease time-to-live", members_->rpc_timeout(),
                     [&](const Stubs& stubs, grpc::ClientContext* ctx) {
                       return stubs.lease->LeaseTimeToLive(ctx, req, &resp);
                     });
  if (!s.ok()) return s;
  return std::make_pair(resp.ttl(), resp.grantedttl());
}

// One adoption per client at a time: callers that arrive meanwhile take
// its outcome, lease or failure, where each would otherwise grant and
// register a holder lease of its own (thousands at once from a client
// that bench/store_bench.cc shares between simulated nodes) or redo a
// failed adoption one after another. A waiter keeps to its own deadline
// (ScopedCallDeadline) and to Close, and adopts again where the adopter
// failed past a deadline earlier than the waiter's.
absl::StatusOr<int64_t> Leases::JobLease() {
  const absl::Time deadline = ScopedCallDeadline::Current();
  {
    absl::MutexLock lock(&mu_);
    for (;;) {
      if (job_lease_ != 0) return job_lease_;
      if (closed_) return absl::FailedPreconditionError("etcd store closed");
      if (!adopting_) break;
      const uint64_t awaited = adoptions_;
      if (hooks_->lease_wait) hooks_->lease_wait();
      auto over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return adoptions_ != awaited || closed_;
      };
      const bool ended =
          mu_.AwaitWithDeadline(absl::Condition(&over), deadline);
      if (job_lease_ != 0) return job_lease_;
      if (closed_) return absl::FailedPreconditionError("etcd store closed");
      if (!ended) {
        return absl::DeadlineExceededError(absl::StrCat(
            "etcd job lease ", meta_,
            "lease: another call's adoption of it did not end before this "
            "call's deadline"));
      }
      if (adoption_failed_ && adoption_cut_at_ >= deadline) {
        return adoption_error_;
      }
      // Its adopter ran out of time and this call has more, or the lease
      // it adopted was lost since (KeepAliveLoop): adopt (or wait for
      // another waiter that does).
    }
    adopting_ = true;
  }
  auto adopted = AdoptJobLease();
  absl::MutexLock lock(&mu_);
  adopting_ = false;
  ++adoptions_;
  adoption_failed_ = !adopted.ok();
  if (!adopted.ok()) {
    adoption_error_ = adopted.status();
    adoption_cut_at_ =
        absl::Now() >= deadline ? deadline : absl::InfiniteFuture();
  }
  return adopted;
}

absl::Status Leases::EnsureJobLeaseRecord() {
  const std::string lease_key = meta_ + "lease";
  for (;;) {
    auto r = members_->Range(lease_key, "");
    if (!r.ok()) return r.status();
    int64_t id = 0;
    if (r->kvs_size() > 0 && absl::SimpleAtoi(r->kvs(0).value(), &id)) {
      auto ttl = TimeToLive(id);
      if (!ttl.ok()) return ttl.status();
      if (ttl->first > 0) return absl::OkStatus();
      // A dead job's record: clear it so the next round creates one.
      etcdserverpb::TxnRequest t;
      auto* c = t.add_compare();
      c->set_key(lease_key);
      c->set_target(Compare::MOD);
      c->set_mod_revision(r->kvs(0).mod_revision());
      t.add_success()->mutable_request_delete_range()->set_key(lease_key);
      if (auto s = members_->Txn(t, "clear stale lease"); !s.ok()) {
        return s.status();
      }
      continue;
    }
    auto granted = Grant(session_ttl_);
    if (!granted.ok()) return granted.status();
    etcdserverpb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(lease_key);
    c->set_target(Compare::CREATE);
    c->set_create_revision(0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(lease_key);
    put->set_value(absl::StrCat(*granted));
    put->set_lease(*granted);
    auto resp = members_->Txn(t, "create job lease");
    if (!resp.ok()) return resp.status();
    if (resp->succeeded()) return absl::OkStatus();
    Revoke(*granted);
  }
}

absl::StatusOr<int64_t> Leases::AdoptJobLease() {
  if (absl::Status s = EnsureJobLeaseRecord(); !s.ok()) return s;
  auto r = members_->Range(meta_ + "lease", "");
  if (!r.ok()) return r.status();
  int64_t id = 0;
  if (r->kvs_size() == 0 || !absl::SimpleAtoi(r->kvs(0).value(), &id)) {
    return absl::AbortedError("etcd job lease vanished while joining");
  }
  auto own = Grant(session_ttl_);
  if (!own.ok()) return own.status();
  etcdserverpb::TxnRequest t;
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(absl::StrCat(meta_, "holders/", *own));
  put->set_lease(*own);
  if (auto s = members_->Txn(t, "register holder"); !s.ok()) {
    return s.status();
  }
  if (hooks_->adopted) hooks_->adopted();
  absl::MutexLock lock(&mu_);
  job_lease_ = id;
  own_lease_ = *own;
  // Closed while this adopted: FinishClose waits for the adoption to end
  // (`adopting_`) before it reads the leases, so it revokes this one; a
  // keeper started now would never be joined.
  if (closed_) {
    return absl::CancelledError(absl::StrCat(
        "etcd job lease ", meta_, "lease: the store was closed while joining"));
  }
  if (!keeper_.joinable()) keeper_ = std::thread([this] { KeepAliveLoop(); });
  return job_lease_;
}

void Leases::KeepAliveLoop() {
  const absl::Duration period = session_ttl_ / 3;
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    stop_cv_.WaitWithTimeout(&mu_, period);
    if (closed_) break;
    const int64_t job = job_lease_, own = own_lease_;
    mu_.Unlock();
    for (int64_t id : {job, own}) {
      if (id == 0) continue;
      auto alive = KeepAlive(id);
      if (!alive.ok()) {
        DJ_LOG_WARNING("etcd lease keep-alive: {}", alive.status());
      } else if (!*alive) {
        DJ_LOG_WARNING("etcd lease {:x} expired; re-creating it", id);
        absl::MutexLock relock(&mu_);
        job_lease_ = 0;
      }
    }
    mu_.Lock();
  }
}

absl::StatusOr<int64_t> Leases::LeaseFor(absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration()) return JobLease();
  // The job lease must exist so this agent counts as a holder.
  if (auto j = JobLease(); !j.ok()) return j.status();
  auto id = Grant(ttl);
  if (!id.ok()) return id.status();
  absl::MutexLock lock(&mu_);
  ttl_leases_.push_back(*id);
  if (ttl_leases_.size() > 8) ttl_leases_.erase(ttl_leases_.begin());
  return id;
}

int64_t Leases::CurrentJobLease() {
  absl::MutexLock lock(&mu_);
  return job_lease_;
}

bool Leases::BeginClose() {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  closed_ = true;
  stop_cv_.SignalAll();
  ttl_at_close_ = ttl_leases_;
  return true;
}

int64_t Leases::FinishClose() {
  int64_t job, own;
  std::vector<int64_t> ttl;
  std::thread keeper;
  {
    // An adoption of the job lease under way ends at its next call, which
    // the cancelled calls refuse; its leases are read only after it, so
    // that the holder lease it granted is revoked below, and it starts no
    // keeper.
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* adopting) { return !*adopting; }, &adopting_));
    job = job_lease_;
    own = own_lease_;
    ttl = ttl_at_close_;
    keeper = std::move(keeper_);
  }
  renewals_.Stop();
  if (keeper.joinable()) keeper.join();
  for (int64_t id : ttl) Revoke(id);
  if (own != 0) Revoke(own);
  return job;
}

std::optional<LeaseAges::Info> LeaseAges::Of(int64_t id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = info_.find(id);
    // Past its expiry the lease was renewed (Renew): look it up again.
    if (it != info_.end() && it->second.expires > absl::Now()) {
      return it->second;
    }
  }
  auto ttl = leases_->TimeToLive(id);
  if (!ttl.ok() || ttl->first <= 0) return std::nullopt;
  const Info info{absl::Now() + absl::Seconds(ttl->first),
                  absl::Seconds(ttl->second)};
  absl::MutexLock lock(&mu_);
  if (info_.size() > 4096) info_.clear();
  info_[id] = info;
  return info;
}

}  // namespace distjob::etcd
