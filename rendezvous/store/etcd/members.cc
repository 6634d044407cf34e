#include "rendezvous/store/etcd/members.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/backoff.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/resolver.h"
#include "rendezvous/store/store_interface.h"

namespace distjob::etcd {

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::UNKNOWN;
}

Members::Members(const std::vector<std::string>& endpoints,
                 std::shared_ptr<grpc::ChannelCredentials> creds,
                 absl::Duration rpc_timeout, InFlightCalls* calls,
                 const Hooks* hooks)
    : creds_(std::move(creds)),
      rpc_timeout_(rpc_timeout),
      calls_(calls),
      hooks_(hooks) {
  for (const auto& ep : endpoints) {
    Member m;
    m.endpoint = ep;
    m.stubs = NewStubs(ep);
    members_.push_back(std::move(m));
  }
}

std::string Members::Endpoints() const {
  std::vector<std::string> eps;
  for (const auto& m : members_) eps.push_back(m.endpoint);
  return absl::StrJoin(eps, ",");
}

std::shared_ptr<Stubs> Members::NewStubs(const std::string& ep) {
  auto s = std::make_shared<Stubs>();
  // Through the agent's resolver (common/resolver.h): gRPC is handed
  // addresses, never a name it would resolve itself. This runs inside a
  // call (NoteResult): the look-up keeps to the caller's deadline and
  // ends when the store is closed, as the call's RPCs do.
  const absl::Duration left = ScopedCallDeadline::Current() - absl::Now();
  auto target = ResolveGrpcEndpoint(
      ep, std::max(absl::ZeroDuration(), std::min(absl::Seconds(2), left)),
      [this] { return calls_->Refused(); });
  if (!target.ok()) {
    s->unresolved = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 std::string(target.status().message()));
    return s;
  }
  grpc::ChannelArguments args;
  // Each member gets its own connection: fail-over is ours.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // What one answer may hold: a page of the store's values (each at
  // most 1 MiB) with their framing; more is refused, never buffered.
  args.SetMaxReceiveMessageSize(16 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // A starting etcd accepts connections before it serves them; gRPC's
  // default 20 s connect timeout would hold such a connection that long.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // The member's name, as a name target would give: https checks the
  // server certificate against it, not against the address.
  args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target->authority);
  args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, target->host);
  s->channel = hooks_->interceptors
                   ? grpc::experimental::CreateCustomChannelWithInterceptors(
                         target->target, creds_, args, hooks_->interceptors())
                   : grpc::CreateCustomChannel(target->target, creds_, args);
  s->kv = etcdserverpb::KV::NewStub(s->channel);
  s->lease = etcdserverpb::Lease::NewStub(s->channel);
  s->watch = etcdserverpb::Watch::NewStub(s->channel);
  return s;
}

std::shared_ptr<Stubs> Members::StubsOf(size_t i) {
  absl::MutexLock lock(&mu_);
  return members_[i].stubs;
}

// The new channel is made outside the lock: its name lookup may take a
// while, and every other call reads its member's stubs under it.
void Members::NoteResult(size_t i, bool ok) {
  std::string endpoint;
  {
    absl::MutexLock lock(&mu_);
    Member& m = members_[i];
    if (ok || ++m.failures < 3) {
      if (ok) m.failures = 0;
      return;
    }
    m.failures = 0;
    endpoint = m.endpoint;
  }
  auto fresh = NewStubs(endpoint);
  absl::MutexLock lock(&mu_);
  members_[i].stubs = std::move(fresh);
}

void Members::MovePast(size_t i) {
  size_t seen = i;
  current_.compare_exchange_strong(seen, (i + 1) % members_.size());
}

absl::Status Members::Call(absl::string_view what, absl::Duration budget,
                           const Rpc& rpc, bool* retried) {
  // The caller's deadline (a rendezvous join's) bounds the whole call.
  const absl::Time deadline =
      std::min(absl::Now() + budget, ScopedCallDeadline::Current());
  grpc::Status last;
  // Jittered, so the agents of a job do not retry a recovering cluster
  // in step.
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(1));
  // An attempt that times out is tried again (at the next member) with
  // twice as long: a member that does not answer is left after 5 s, and
  // an overloaded one is not asked every 5 s for work it is still doing
  // (a timed-out write is still committed: 4,096 simulated nodes' writes
  // timed out and were sent again and again, bench/run.py etcd).
  absl::Duration attempt_cap = absl::Seconds(5);
  for (size_t attempt = 1;; ++attempt) {
    const size_t i = Current();
    grpc::ClientContext ctx;
    const absl::Time attempt_deadline =
        std::min(deadline, absl::Now() + attempt_cap);
    ctx.set_deadline(absl::ToChronoTime(attempt_deadline));
    auto stubs = StubsOf(i);
    if (!calls_->Register(&ctx)) {
      return absl::CancelledError(
          absl::StrCat("etcd ", what, ": the store was closed"));
    }
    last = stubs->kv != nullptr ? rpc(*stubs, &ctx) : stubs->unresolved;
    calls_->Unregister(&ctx);
    NoteResult(i, last.ok() || !Retryable(last));
    if (last.ok()) return absl::OkStatus();
    if (!Retryable(last)) return FromGrpcStatus(last);
    if (retried != nullptr) *retried = true;
    if (last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        attempt_cap < absl::Seconds(40)) {
      attempt_cap *= 2;
    }
    DJ_LOG_DEBUG("etcd {} at {}: {}", what, EndpointOf(i),
                 last.error_message());
    MovePast(i);
    if (absl::Now() >= deadline) break;
    if (attempt % members_.size() == 0) {
      absl::SleepFor(std::min(backoff.Next(), deadline - absl::Now()));
    }
  }
  return absl::UnavailableError(absl::StrCat("etcd cluster ", Endpoints(),
                                             " unreachable for ", what, ": ",
                                             last.error_message()));
}

absl::StatusOr<etcdserverpb::TxnResponse> Members::Txn(
    const etcdserverpb::TxnRequest& req, absl::string_view what,
    bool* retried) {
  etcdserverpb::TxnResponse resp;
  auto s = Call(
      what, rpc_timeout_,
      [&](const Stubs& stubs, grpc::ClientContext* ctx) {
        resp.Clear();
        return stubs.kv->Txn(ctx, req, &resp);
      },
      retried);
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<etcdserverpb::RangeResponse> Members::Range(
    const std::string& key, const std::string& end, bool count_only,
    int64_t limit, int64_t revision) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_range_end(end);
  req.set_count_only(count_only);
  req.set_limit(limit);
  req.set_revision(revision);
  etcdserverpb::RangeResponse resp;
  auto s = Call("range " + key, rpc_timeout_,
                [&](const Stubs& stubs, grpc::ClientContext* ctx) {
                  resp.Clear();
                  return stubs.kv->Range(ctx, req, &resp);
                });
  if (!s.ok()) return s;
  return resp;
}

}  // namespace distjob::etcd
