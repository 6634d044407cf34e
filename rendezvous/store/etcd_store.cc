#include "rendezvous/store/etcd_store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/backoff.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"
#include "common/text.h"
#include "proto/etcd_rpc.grpc.pb.h"

namespace distjob {
namespace {

using etcdserverpb::Compare;

// The smallest key greater than every key that starts with `prefix`, as
// etcd's range_end wants it ("\0" means: to the end of the keyspace).
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::UNKNOWN;
}

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv-conf ", what, "=", path, ": cannot read file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// etcd tools accept http(s)://HOST:PORT; gRPC wants HOST:PORT. Anything
// else is refused here: a garbled endpoint would otherwise only show as
// the store being unreachable, after the whole join timeout.
absl::StatusOr<std::string> NormalizeEndpoint(absl::string_view given) {
  absl::string_view ep = given;
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-endpoint ", QuoteForMessage(given), ": ", why,
        "; expected [http[s]://]HOST[:PORT][,...] (default port 2379)"));
  };
  absl::ConsumePrefix(&ep, "http://") || absl::ConsumePrefix(&ep, "https://");
  absl::ConsumeSuffix(&ep, "/");
  if (absl::StrContains(ep, "://")) return invalid("unsupported scheme");
  absl::string_view host = ep;
  absl::string_view port;
  if (absl::StartsWith(ep, "[")) {
    const size_t close = ep.find(']');
    if (close == absl::string_view::npos) return invalid("unclosed '['");
    host = ep.substr(1, close - 1);
    if (!IsIpLiteral(host)) return invalid("only an IPv6 address goes in []");
    absl::string_view rest = ep.substr(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) {
      return invalid("text after ']'");
    }
    if (!rest.empty()) port = rest;
  } else if (const size_t colon = ep.rfind(':');
             colon != absl::string_view::npos) {
    if (ep.find(':') != colon) {
      return invalid("more than one ':' (bracket an IPv6 address)");
    }
    host = ep.substr(0, colon);
    port = ep.substr(colon + 1);
    if (port.empty()) return invalid("empty port");
  }
  if (absl::Status s = CheckHostName(host, "--rdzv-endpoint host"); !s.ok()) {
    return s;
  }
  int number = 2379;
  if (!port.empty()) {
    const bool digits =
        port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
    if (!digits || !absl::SimpleAtoi(port, &number) || number < 1 ||
        number > 65535) {
      return invalid("the port must be 1..65535");
    }
  }
  if (absl::StrContains(host, ':'))
    return absl::StrCat("[", host, "]:", number);
  return absl::StrCat(host, ":", number);
}

// etcd refuses a transaction of more operations than its --max-txn-ops
// (default 128); a request of more keys is split into transactions of
// this many, each atomic on its own.
constexpr size_t kMaxTxnOps = 128;

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

int64_t TtlSeconds(absl::Duration d) {
  return std::max<int64_t>(
      1, absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))));
}

}  // namespace

absl::StatusOr<EtcdStoreOptions> ParseEtcdOptions(const std::string& endpoints,
                                                  const std::string& conf,
                                                  const std::string& run_id) {
  EtcdStoreOptions o;
  o.run_id = run_id;
  for (absl::string_view ep :
       absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
    auto normalized = NormalizeEndpoint(absl::StripAsciiWhitespace(ep));
    if (!normalized.ok()) return normalized.status();
    o.endpoints.push_back(*std::move(normalized));
  }
  for (absl::string_view item :
       absl::StrSplit(conf, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string key(absl::StripAsciiWhitespace(kv.first));
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    auto seconds = [&](absl::Duration* out) -> absl::Status {
      double s;
      // The cap matches the other --rdzv-conf durations (365 days).
      if (!absl::SimpleAtod(value, &s) || !std::isfinite(s) || s <= 0 ||
          s > 365.0 * 24 * 3600) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--rdzv-conf ", key, "=", QuoteForMessage(value),
            ": expected a positive, finite number of seconds (at most 365 "
            "days)"));
      }
      *out = absl::Seconds(s);
      return absl::OkStatus();
    };
    if (key == "etcd_prefix") {
      if (value.empty() || value[0] != '/') {
        return absl::InvalidArgumentError(
            absl::StrCat("--rdzv-conf etcd_prefix=", value,
                         ": expected an absolute key prefix like /distjob"));
      }
      o.prefix = value;
    } else if (key == "ca_cert") {
      o.ca_cert = value;
    } else if (key == "cert") {
      o.cert = value;
    } else if (key == "key") {
      o.key = value;
    } else if (key == "read_timeout") {
      if (auto s = seconds(&o.rpc_timeout); !s.ok()) return s;
    } else if (key == "etcd_session_ttl") {
      if (auto s = seconds(&o.session_ttl); !s.ok()) return s;
    }
  }
  if (o.cert.empty() != o.key.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-conf cert and key go together (client certificate and its "
        "private key)");
  }
  if (o.endpoints.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-endpoint is empty; the etcd backend needs "
        "[http[s]://]HOST[:PORT][,...] (default port 2379)");
  }
  while (absl::EndsWith(o.prefix, "/") && o.prefix.size() > 1) {
    o.prefix.pop_back();
  }
  return o;
}

struct EtcdStore::Impl {
  EtcdStoreOptions options;
  std::string data;  // <prefix>/<run_id>/kv/
  std::string meta;  // <prefix>/<run_id>/agent/
  // <prefix>/<run_id>/ctr/: the sequences of Add's counters, outside kv/
  // so that no listing or watch of the store's keys sees them.
  std::string counters;
  struct Stubs {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    // No channel (the stubs are null) while the member's name does not
    // resolve: its calls fail with this, and after a few the name is
    // looked up again (NoteResult).
    grpc::Status unresolved;
  };
  struct Member {
    std::string endpoint;
    std::shared_ptr<Stubs> stubs;  // guarded by members_mu
    int failures = 0;              // guarded by members_mu
  };
  std::vector<Member> members;
  // The member calls go to first; always below members.size(), so that
  // moving past a failed member compares with the index it was read as.
  std::atomic<size_t> current{0};
  std::shared_ptr<grpc::ChannelCredentials> creds;
  absl::Mutex members_mu;

  // Calls in flight, so Close can cancel them: a leaving agent must not
  // wait out a blocked watch. Only the closing thread may call afterwards.
  absl::Mutex calls_mu;
  std::set<grpc::ClientContext*> calls ABSL_GUARDED_BY(calls_mu);
  bool cancelled ABSL_GUARDED_BY(calls_mu) = false;
  std::thread::id closer ABSL_GUARDED_BY(calls_mu);

  bool Register(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&calls_mu);
    if (cancelled && std::this_thread::get_id() != closer) return false;
    calls.insert(ctx);
    return true;
  }
  void Unregister(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&calls_mu);
    calls.erase(ctx);
  }
  void CancelAll() {
    absl::MutexLock lock(&calls_mu);
    cancelled = true;
    closer = std::this_thread::get_id();
    for (auto* ctx : calls) ctx->TryCancel();
  }

  std::shared_ptr<Stubs> NewStubs(const std::string& ep) {
    auto s = std::make_shared<Stubs>();
    // Through the agent's resolver (common/resolver.h): gRPC is handed
    // addresses, never a name it would resolve itself. This runs inside a
    // call (NoteResult): the look-up keeps to the caller's deadline and
    // ends when the store is closed, as the call's RPCs do.
    const absl::Duration left = ScopedCallDeadline::Current() - absl::Now();
    auto target = ResolveGrpcEndpoint(
        ep, std::max(absl::ZeroDuration(), std::min(absl::Seconds(2), left)),
        [this] {
          absl::MutexLock lock(&calls_mu);
          return cancelled && std::this_thread::get_id() != closer;
        });
    if (!target.ok()) {
      s->unresolved = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   std::string(target.status().message()));
      return s;
    }
    grpc::ChannelArguments args;
    // Each member gets its own connection: fail-over is ours.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    // A starting etcd accepts connections before it serves them; gRPC's
    // default 20 s connect timeout would hold such a connection that long.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
    // The member's name, as a name target would give: https checks the
    // server certificate against it, not against the address.
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target->authority);
    args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, target->host);
    s->channel = grpc::CreateCustomChannel(target->target, creds, args);
    s->kv = etcdserverpb::KV::NewStub(s->channel);
    s->lease = etcdserverpb::Lease::NewStub(s->channel);
    s->watch = etcdserverpb::Watch::NewStub(s->channel);
    return s;
  }

  std::shared_ptr<Stubs> StubsOf(size_t i) {
    absl::MutexLock lock(&members_mu);
    return members[i].stubs;
  }

  // A channel that connected while its member was starting up can stay
  // broken after the member is up; a fresh one after a few failures in a
  // row recovers at once.
  // The new channel is made outside the lock: its name lookup may take a
  // while, and every other call reads its member's stubs under it.
  void NoteResult(size_t i, bool ok) {
    std::string endpoint;
    {
      absl::MutexLock lock(&members_mu);
      Member& m = members[i];
      if (ok || ++m.failures < 3) {
        if (ok) m.failures = 0;
        return;
      }
      m.failures = 0;
      endpoint = m.endpoint;
    }
    auto fresh = NewStubs(endpoint);
    absl::MutexLock lock(&members_mu);
    members[i].stubs = std::move(fresh);
  }

  absl::Mutex adopt_mu;  // held by the one JobLease adopting the lease
  absl::Mutex mu;
  int64_t job_lease ABSL_GUARDED_BY(mu) = 0;
  int64_t own_lease ABSL_GUARDED_BY(mu) = 0;
  std::vector<int64_t> ttl_leases ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
  // TTL'd writes get leases that are never renewed, so one look-up per
  // lease gives its expiry for good: listings cost one RPC per new
  // heartbeat, not one per key per listing.
  struct LeaseInfo {
    absl::Time expires;  // on this process' clock, from etcd's remaining TTL
    absl::Duration granted;
  };
  std::unordered_map<int64_t, LeaseInfo> lease_info ABSL_GUARDED_BY(mu);
  // This client's last TTL'd write of each key (full etcd key), so that
  // writing the same value again can renew its lease instead (Renew).
  struct TtlWrite {
    std::string value;
    int64_t lease;
    int64_t ttl_seconds;
  };
  std::unordered_map<std::string, TtlWrite> ttl_writes ABSL_GUARDED_BY(mu);
  absl::CondVar stop_cv;
  std::thread keeper;

  std::string Endpoints() const {
    std::vector<std::string> eps;
    for (const auto& m : members) eps.push_back(m.endpoint);
    return absl::StrJoin(eps, ",");
  }

  // Runs `call` on one member after another until one answers or `budget`
  // is spent; a member that is down or has lost quorum is skipped.
  template <typename F>
  absl::Status Call(absl::string_view what, absl::Duration budget, F call) {
    // The caller's deadline (a rendezvous join's) bounds the whole call.
    const absl::Time deadline =
        std::min(absl::Now() + budget, ScopedCallDeadline::Current());
    grpc::Status last;
    // Jittered, so the agents of a job do not retry a recovering cluster
    // in step.
    Backoff backoff(absl::Milliseconds(50), absl::Seconds(1));
    for (size_t attempt = 1;; ++attempt) {
      const size_t i = current.load() % members.size();
      grpc::ClientContext ctx;
      const absl::Time attempt_deadline =
          std::min(deadline, absl::Now() + absl::Seconds(5));
      ctx.set_deadline(absl::ToChronoTime(attempt_deadline));
      auto stubs = StubsOf(i);
      if (!Register(&ctx)) {
        return absl::CancelledError(
            absl::StrCat("etcd ", what, ": the store was closed"));
      }
      last = stubs->kv != nullptr ? call(*stubs->kv, *stubs->lease, &ctx)
                                  : stubs->unresolved;
      Unregister(&ctx);
      NoteResult(i, last.ok() || !Retryable(last));
      if (last.ok()) return absl::OkStatus();
      if (!Retryable(last)) return FromGrpcStatus(last);
      DJ_LOG_DEBUG("etcd {} at {}: {}", what, members[i].endpoint,
                   last.error_message());
      size_t seen = i;
      current.compare_exchange_strong(seen, (i + 1) % members.size());
      if (absl::Now() >= deadline) break;
      if (attempt % members.size() == 0) {
        absl::SleepFor(std::min(backoff.Next(), deadline - absl::Now()));
      }
    }
    return absl::UnavailableError(absl::StrCat("etcd cluster ", Endpoints(),
                                               " unreachable for ", what, ": ",
                                               last.error_message()));
  }

  // A key written otherwise than by Add stops being a counter: its next
  // Add starts from the value written (see Add).
  void ForgetCounter(etcdserverpb::TxnRequest* t, const std::string& key) {
    t->add_success()->mutable_request_delete_range()->set_key(counters + key);
  }

  absl::StatusOr<etcdserverpb::TxnResponse> Txn(
      const etcdserverpb::TxnRequest& req, absl::string_view what) {
    etcdserverpb::TxnResponse resp;
    auto s = Call(what, options.rpc_timeout,
                  [&](auto& kv, auto&, grpc::ClientContext* ctx) {
                    resp.Clear();
                    return kv.Txn(ctx, req, &resp);
                  });
    if (!s.ok()) return s;
    return resp;
  }

  // `limit`: at most this many keys (0: all), `more` in the answer when
  // the range holds more.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    const std::string& end,
                                                    bool count_only = false,
                                                    int64_t limit = 0) {
    etcdserverpb::RangeRequest req;
    req.set_key(key);
    req.set_range_end(end);
    req.set_count_only(count_only);
    req.set_limit(limit);
    etcdserverpb::RangeResponse resp;
    auto s = Call("range " + key, options.rpc_timeout,
                  [&](auto& kv, auto&, grpc::ClientContext* ctx) {
                    resp.Clear();
                    return kv.Range(ctx, req, &resp);
                  });
    if (!s.ok()) return s;
    return resp;
  }

  absl::StatusOr<int64_t> Grant(absl::Duration ttl) {
    etcdserverpb::LeaseGrantRequest req;
    req.set_ttl(TtlSeconds(ttl));
    etcdserverpb::LeaseGrantResponse resp;
    auto s = Call("lease grant", options.rpc_timeout,
                  [&](auto&, auto& lease, grpc::ClientContext* ctx) {
                    return lease.LeaseGrant(ctx, req, &resp);
                  });
    if (!s.ok()) return s;
    if (!resp.error().empty()) {
      return absl::UnavailableError(
          absl::StrCat("etcd lease grant: ", resp.error()));
    }
    return resp.id();
  }

  void Revoke(int64_t id) {
    etcdserverpb::LeaseRevokeRequest req;
    req.set_id(id);
    etcdserverpb::LeaseRevokeResponse resp;
    (void)Call("lease revoke", absl::Seconds(5),
               [&](auto&, auto& lease, grpc::ClientContext* ctx) {
                 return lease.LeaseRevoke(ctx, req, &resp);
               });
  }

  // Seconds left on lease `id` (<= 0: gone) and the TTL it was granted.
  absl::StatusOr<std::pair<int64_t, int64_t>> TimeToLive(int64_t id) {
    etcdserverpb::LeaseTimeToLiveRequest req;
    req.set_id(id);
    etcdserverpb::LeaseTimeToLiveResponse resp;
    auto s = Call("lease time-to-live", options.rpc_timeout,
                  [&](auto&, auto& lease, grpc::ClientContext* ctx) {
                    return lease.LeaseTimeToLive(ctx, req, &resp);
                  });
    if (!s.ok()) return s;
    return std::make_pair(resp.ttl(), resp.grantedttl());
  }

  // One keep-alive round trip; false when etcd no longer knows the lease.
  absl::StatusOr<bool> KeepAlive(int64_t id) {
    bool alive = false;
    auto s = Call("lease keep-alive", absl::Seconds(5),
                  [&](auto&, auto& lease, grpc::ClientContext* ctx) {
                    auto stream = lease.LeaseKeepAlive(ctx);
                    etcdserverpb::LeaseKeepAliveRequest req;
                    req.set_id(id);
                    etcdserverpb::LeaseKeepAliveResponse resp;
                    if (stream->Write(req) && stream->Read(&resp)) {
                      alive = resp.ttl() > 0;
                    }
                    stream->WritesDone();
                    ctx->TryCancel();
                    grpc::Status st = stream->Finish();
                    if (st.error_code() == grpc::StatusCode::CANCELLED) {
                      return grpc::Status::OK;
                    }
                    return st;
                  });
    if (!s.ok()) return s;
    return alive;
  }

  // The job-wide lease: adopted from `<ns>/agent/lease` if a live one is
  // there, created otherwise; this agent registers as a holder under its
  // own lease so the last one out knows to revoke the job lease.
  absl::StatusOr<int64_t> JobLease() {
    {
      absl::MutexLock lock(&mu);
      if (job_lease != 0) return job_lease;
      if (closed) return absl::FailedPreconditionError("etcd store closed");
    }
    // One adoption per client: callers that arrive meanwhile take its
    // lease, where each would otherwise grant and register a holder lease
    // of its own (thousands at once from a client that bench/store_bench.cc
    // shares between simulated nodes).
    absl::MutexLock adopting(&adopt_mu);
    {
      absl::MutexLock lock(&mu);
      if (job_lease != 0) return job_lease;
    }
    const std::string lease_key = meta + "lease";
    for (;;) {
      auto r = Range(lease_key, "");
      if (!r.ok()) return r.status();
      int64_t id = 0;
      if (r->kvs_size() > 0 && absl::SimpleAtoi(r->kvs(0).value(), &id)) {
        auto ttl = TimeToLive(id);
        if (!ttl.ok()) return ttl.status();
        if (ttl->first > 0) break;
        // A dead job's record: clear it so the next round creates one.
        etcdserverpb::TxnRequest t;
        auto* c = t.add_compare();
        c->set_key(lease_key);
        c->set_target(Compare::MOD);
        c->set_mod_revision(r->kvs(0).mod_revision());
        t.add_success()->mutable_request_delete_range()->set_key(lease_key);
        if (auto s = Txn(t, "clear stale lease"); !s.ok()) return s.status();
        continue;
      }
      auto granted = Grant(options.session_ttl);
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
      auto resp = Txn(t, "create job lease");
      if (!resp.ok()) return resp.status();
      if (resp->succeeded()) {
        id = *granted;
        break;
      }
      Revoke(*granted);
    }
    auto r = Range(lease_key, "");
    if (!r.ok()) return r.status();
    int64_t id = 0;
    if (r->kvs_size() == 0 || !absl::SimpleAtoi(r->kvs(0).value(), &id)) {
      return absl::AbortedError("etcd job lease vanished while joining");
    }
    auto own = Grant(options.session_ttl);
    if (!own.ok()) return own.status();
    etcdserverpb::TxnRequest t;
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(absl::StrCat(meta, "holders/", *own));
    put->set_lease(*own);
    if (auto s = Txn(t, "register holder"); !s.ok()) return s.status();
    absl::MutexLock lock(&mu);
    job_lease = id;
    own_lease = *own;
    if (!keeper.joinable()) keeper = std::thread([this] { KeepAliveLoop(); });
    return job_lease;
  }

  void KeepAliveLoop() {
    const absl::Duration period = options.session_ttl / 3;
    absl::MutexLock lock(&mu);
    while (!closed) {
      stop_cv.WaitWithTimeout(&mu, period);
      if (closed) break;
      const int64_t job = job_lease, own = own_lease;
      mu.Unlock();
      for (int64_t id : {job, own}) {
        if (id == 0) continue;
        auto alive = KeepAlive(id);
        if (!alive.ok()) {
          DJ_LOG_WARNING("etcd lease keep-alive: {}", alive.status());
        } else if (!*alive) {
          DJ_LOG_WARNING("etcd lease {:x} expired; re-creating it", id);
          absl::MutexLock relock(&mu);
          job_lease = 0;
        }
      }
      mu.Lock();
    }
  }

  absl::StatusOr<int64_t> LeaseFor(absl::Duration ttl) {
    if (ttl <= absl::ZeroDuration()) return JobLease();
    // The job lease must exist so this agent counts as a holder.
    if (auto j = JobLease(); !j.ok()) return j.status();
    auto id = Grant(ttl);
    if (!id.ok()) return id.status();
    absl::MutexLock lock(&mu);
    ttl_leases.push_back(*id);
    if (ttl_leases.size() > 8) ttl_leases.erase(ttl_leases.begin());
    return id;
  }

  // Writing a TTL'd key again with the value it holds renews its lease: a
  // keep-alive, not a put. Like the embedded store's renewal
  // (store_core.cc), it wakes no watcher; heartbeats live under ctl/, which
  // every node's monitor watches, so a put per heartbeat would wake every
  // node on every node's heartbeat, O(N²) wake-ups a second, and cost etcd
  // a lease grant, a put and a lease expiry per heartbeat. The revision when
  // renewed; nullopt when the keys must be written (first write, another
  // value or TTL, or a key deleted or overwritten by another client since).
  absl::StatusOr<std::optional<int64_t>> Renew(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) {
    int64_t lease = 0;
    {
      absl::MutexLock lock(&mu);
      for (const auto& [k, v] : kvs) {
        auto it = ttl_writes.find(data + k);
        if (it == ttl_writes.end() || it->second.value != v ||
            it->second.ttl_seconds != TtlSeconds(ttl) ||
            (lease != 0 && it->second.lease != lease)) {
          return std::nullopt;
        }
        lease = it->second.lease;
      }
    }
    if (lease == 0) return std::nullopt;
    auto alive = KeepAlive(lease);
    if (!alive.ok()) return alive.status();
    if (!*alive) return std::nullopt;
    etcdserverpb::TxnRequest t;
    for (const auto& [k, v] : kvs) {
      auto* c = t.add_compare();
      c->set_key(data + k);
      c->set_target(Compare::LEASE);
      c->set_lease(lease);
      c = t.add_compare();
      c->set_key(data + k);
      c->set_target(Compare::VALUE);
      c->set_value(v);
    }
    auto resp = Txn(t, "renew");
    if (!resp.ok()) return resp.status();
    if (!resp->succeeded()) return std::nullopt;
    return resp->header().revision();
  }

  void NoteTtlWrites(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl, int64_t lease) {
    absl::MutexLock lock(&mu);
    // A bound for a client shared by many writers (bench/store_bench.cc);
    // an agent writes a few TTL'd keys.
    if (ttl_writes.size() > 4096) ttl_writes.clear();
    for (const auto& [k, v] : kvs) {
      if (ttl > absl::ZeroDuration()) {
        ttl_writes[data + k] = TtlWrite{v, lease, TtlSeconds(ttl)};
      } else {
        ttl_writes.erase(data + k);
      }
    }
  }

  // A Watch that answers when anything in one of `ranges` (key, range
  // end) changes after `after_revision`, or {false, revision} at
  // `timeout`: one watcher per range on one stream.
  absl::StatusOr<std::pair<bool, int64_t>> WatchRange(
      const std::vector<std::pair<std::string, std::string>>& ranges,
      int64_t after_revision, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    int64_t revision = after_revision;
    grpc::Status last;
    for (size_t attempt = 1;; ++attempt) {
      const size_t i = current.load() % members.size();
      grpc::ClientContext ctx;
      auto stubs = StubsOf(i);
      if (!Register(&ctx)) {
        return absl::CancelledError("etcd watch: the store was closed");
      }
      if (stubs->watch == nullptr) {
        Unregister(&ctx);
        NoteResult(i, false);
        last = stubs->unresolved;
        if (absl::Now() >= deadline) return std::make_pair(false, revision);
        size_t seen = i;
        current.compare_exchange_strong(seen, (i + 1) % members.size());
        absl::SleepFor(
            std::min(absl::Milliseconds(200), deadline - absl::Now()));
        continue;
      }
      auto stream = stubs->watch->Watch(&ctx);
      bool written = true;
      for (const auto& [key, end] : ranges) {
        etcdserverpb::WatchRequest req;
        auto* create = req.mutable_create_request();
        create->set_key(key);
        create->set_range_end(end);
        create->set_start_revision(after_revision + 1);
        written = written && stream->Write(req);
      }
      absl::Notification done;
      std::thread timer([&] {
        if (!done.WaitForNotificationWithTimeout(deadline - absl::Now())) {
          ctx.TryCancel();
        }
      });
      bool changed = false;
      if (written) {
        etcdserverpb::WatchResponse resp;
        while (stream->Read(&resp)) {
          revision = std::max(revision, resp.header().revision());
          if (resp.events_size() > 0 || resp.compact_revision() > 0 ||
              resp.canceled()) {
            changed = true;
            for (const auto& e : resp.events()) {
              revision = std::max(revision, e.kv().mod_revision());
            }
            break;
          }
        }
      }
      done.Notify();
      timer.join();
      ctx.TryCancel();
      last = stream->Finish();
      Unregister(&ctx);
      NoteResult(i, changed || !Retryable(last));
      if (changed) return std::make_pair(true, revision);
      if (absl::Now() >= deadline) return std::make_pair(false, revision);
      if (!Retryable(last) &&
          last.error_code() != grpc::StatusCode::CANCELLED) {
        return FromGrpcStatus(last);
      }
      DJ_LOG_DEBUG("etcd watch at {}: {}", members[i].endpoint,
                   last.error_message());
      size_t seen = i;
      current.compare_exchange_strong(seen, (i + 1) % members.size());
      if (attempt % members.size() == 0) {
        absl::SleepFor(
            std::min(absl::Milliseconds(200), deadline - absl::Now()));
      }
      if (absl::Now() - deadline > absl::ZeroDuration()) break;
    }
    return std::make_pair(false, revision);
  }
};

EtcdStore::EtcdStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EtcdStore::~EtcdStore() { Close(); }

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStore::Connect(
    EtcdStoreOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("--rdzv-endpoint: no etcd endpoint");
  }
  std::shared_ptr<grpc::ChannelCredentials> creds =
      grpc::InsecureChannelCredentials();
  if (!options.ca_cert.empty() || !options.cert.empty()) {
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
    creds = grpc::SslCredentials(ssl);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const std::string ns = absl::StrCat(options.prefix, "/", options.run_id, "/");
  impl->data = ns + "kv/";
  impl->meta = ns + "agent/";
  impl->counters = ns + "ctr/";
  impl->creds = creds;
  for (const auto& ep : options.endpoints) {
    Impl::Member m;
    m.endpoint = ep;
    m.stubs = impl->NewStubs(ep);
    impl->members.push_back(std::move(m));
  }
  return std::unique_ptr<EtcdStore>(new EtcdStore(std::move(impl)));
}

void EtcdStore::Close() {
  int64_t job, own;
  std::vector<int64_t> ttl;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
    impl_->stop_cv.SignalAll();
    job = impl_->job_lease;
    own = impl_->own_lease;
    ttl = impl_->ttl_leases;
  }
  impl_->CancelAll();
  if (impl_->keeper.joinable()) impl_->keeper.join();
  for (int64_t id : ttl) impl_->Revoke(id);
  if (own != 0) impl_->Revoke(own);
  // Later calls, from any thread, fail at once.
  absl::Cleanup done = [this] {
    absl::MutexLock lock(&impl_->calls_mu);
    impl_->closer = std::thread::id();
  };
  if (job == 0) return;
  auto holders = impl_->Range(impl_->meta + "holders/",
                              PrefixEnd(impl_->meta + "holders/"), true);
  if (holders.ok() && holders->count() == 0) {
    DJ_LOG_INFO("last agent of run {} out: revoking its etcd keys",
                impl_->options.run_id);
    impl_->Revoke(job);
  }
}

absl::Status EtcdStore::WaitUntilReachable(absl::Duration timeout) {
  etcdserverpb::RangeRequest req;
  req.set_key(impl_->meta + "lease");
  etcdserverpb::RangeResponse resp;
  return impl_->Call("range", timeout,
                     [&](auto& kv, auto&, grpc::ClientContext* ctx) {
                       return kv.Range(ctx, req, &resp);
                     });
}

absl::StatusOr<int64_t> EtcdStore::MultiSet(
    const std::vector<std::pair<std::string, std::string>>& kvs,
    absl::Duration ttl) {
  if (ttl > absl::ZeroDuration()) {
    auto renewed = impl_->Renew(kvs, ttl);
    if (!renewed.ok()) return renewed.status();
    if (renewed->has_value()) return **renewed;
  }
  auto lease = impl_->LeaseFor(ttl);
  if (!lease.ok()) return lease.status();
  int64_t revision = 0;
  auto s = ForEachTxnChunk(
      kvs.size(),
      [&](size_t first, size_t last) {
        etcdserverpb::TxnRequest t;
        for (size_t i = first; i < last; ++i) {
          auto* put = t.add_success()->mutable_request_put();
          put->set_key(impl_->data + kvs[i].first);
          put->set_value(kvs[i].second);
          put->set_lease(*lease);
          impl_->ForgetCounter(&t, kvs[i].first);
        }
        auto resp = impl_->Txn(t, "set");
        if (!resp.ok()) return resp.status();
        revision = resp->header().revision();
        return absl::OkStatus();
      },
      kMaxTxnOps / 2);
  if (!s.ok()) return s;
  impl_->NoteTtlWrites(kvs, ttl, *lease);
  return revision;
}

absl::StatusOr<std::vector<std::string>> EtcdStore::MultiGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
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
    auto s = ForEachTxnChunk(keys.size(), [&](size_t first, size_t last) {
      etcdserverpb::TxnRequest t;
      for (size_t i = first; i < last; ++i) {
        t.add_success()->mutable_request_range()->set_key(impl_->data +
                                                          keys[i]);
      }
      auto resp = impl_->Txn(t, "get");
      if (!resp.ok()) return resp.status();
      if (revision < 0) revision = resp->header().revision();
      for (int i = 0; i < resp->responses_size(); ++i) {
        const auto& r = resp->responses(i).response_range();
        if (r.kvs_size() == 0) {
          missing.push_back(keys[first + i]);
        } else {
          values.push_back(r.kvs(0).value());
        }
      }
      return absl::OkStatus();
    });
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
    auto w = impl_->WatchRange(
        {{impl_->data + common, PrefixEnd(impl_->data + common)}}, revision,
        left);
    if (!w.ok()) return w.status();
  }
}

// A counter is two keys: the value everyone reads (`kv/<key>`) and its
// sequence (`ctr/<key>`), whose etcd version counts the adds of one and
// whose value is the base: the counter is base + version - 1. An add of
// one is a blind put of the sequence in a transaction (etcd applies them
// one after another), so N nodes joining at once make N writes, where a
// read and compare-and-swap of the value made O(N²) as all but one of
// each race's writers lost and retried. Its result is then written to
// the value only while no later add has committed (the sequence's
// mod_revision is still this add's), so the value never goes back. It
// can lag: an add whose value write lost to a later add returns a result
// the value shows only once that later add's write lands, and an agent
// that dies between the two writes leaves the value behind until the
// next add. Add(key, 0) reads the sequence and is exact; the rendezvous
// reads its counters that way (README, etcd). Other deltas and the first
// add compare-and-swap both keys.
absl::StatusOr<int64_t> EtcdStore::Add(const std::string& key, int64_t delta) {
  auto lease = impl_->JobLease();
  if (!lease.ok()) return lease.status();
  const std::string k = impl_->data + key;
  const std::string seq = impl_->counters + key;
  auto not_integer = [&] {
    return absl::FailedPreconditionError(
        absl::StrCat("key '", key, "' does not hold an integer"));
  };
  // Only writers of other deltas (or the first add's creators) can lose a
  // race; they spread their retries out.
  Backoff backoff(absl::Milliseconds(5), absl::Milliseconds(200));
  for (bool first = true;; first = false) {
    if (!first) absl::SleepFor(backoff.Next());
    if (delta == 1) {
      etcdserverpb::TxnRequest t;
      auto* c = t.add_compare();
      c->set_key(seq);
      c->set_target(Compare::VERSION);
      c->set_result(Compare::GREATER);
      c->set_version(0);
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(seq);
      put->set_ignore_value(true);
      put->set_lease(*lease);
      put->set_prev_kv(true);
      auto resp = impl_->Txn(t, "add");
      if (!resp.ok()) return resp.status();
      if (resp->succeeded()) {
        const auto& prev = resp->responses(0).response_put().prev_kv();
        int64_t base = 0;
        if (!absl::SimpleAtoi(prev.value(), &base)) return not_integer();
        const int64_t result = base + prev.version();
        etcdserverpb::TxnRequest w;
        c = w.add_compare();
        c->set_key(seq);
        c->set_target(Compare::MOD);
        c->set_mod_revision(resp->header().revision());
        put = w.add_success()->mutable_request_put();
        put->set_key(k);
        put->set_value(absl::StrCat(result));
        put->set_lease(*lease);
        // The add has happened: a failure here leaves the value behind
        // until the next add, and must not make the caller add again.
        if (auto s = impl_->Txn(w, "add (value)"); !s.ok()) {
          DJ_LOG_WARNING("etcd add {}: {}", key, s.status());
        }
        return result;
      }
    }
    etcdserverpb::TxnRequest read;
    read.add_success()->mutable_request_range()->set_key(seq);
    read.add_success()->mutable_request_range()->set_key(k);
    auto r = impl_->Txn(read, "add (read)");
    if (!r.ok()) return r.status();
    const auto& counter = r->responses(0).response_range();
    const auto& value = r->responses(1).response_range();
    etcdserverpb::TxnRequest t;
    int64_t result = 0;
    auto* c = t.add_compare();
    c->set_key(seq);
    if (counter.kvs_size() > 0) {
      int64_t base = 0;
      if (!absl::SimpleAtoi(counter.kvs(0).value(), &base)) {
        return not_integer();
      }
      result = base + counter.kvs(0).version() - 1 + delta;
      if (delta == 0) return result;
      c->set_target(Compare::MOD);
      c->set_mod_revision(counter.kvs(0).mod_revision());
      // The put counts one in the version: the base takes the rest.
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(seq);
      put->set_value(absl::StrCat(base + delta - 1));
      put->set_lease(*lease);
    } else {
      int64_t current = 0;
      if (value.kvs_size() > 0 &&
          !absl::SimpleAtoi(value.kvs(0).value(), &current)) {
        return not_integer();
      }
      result = current + delta;
      if (delta == 0 && value.kvs_size() > 0) return result;
      c->set_target(Compare::CREATE);
      c->set_create_revision(0);
      c = t.add_compare();
      c->set_key(k);
      if (value.kvs_size() > 0) {
        c->set_target(Compare::MOD);
        c->set_mod_revision(value.kvs(0).mod_revision());
      } else {
        c->set_target(Compare::CREATE);
        c->set_create_revision(0);
      }
      // Version 1: the base is the value.
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(seq);
      put->set_value(absl::StrCat(result));
      put->set_lease(*lease);
    }
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value(absl::StrCat(result));
    put->set_lease(*lease);
    auto resp = impl_->Txn(t, "add");
    if (!resp.ok()) return resp.status();
    if (resp->succeeded()) return result;
  }
}

absl::StatusOr<CompareSetResult> EtcdStore::CompareSet(
    const std::string& key, const std::string& expected,
    const std::string& desired) {
  auto lease = impl_->JobLease();
  if (!lease.ok()) return lease.status();
  const std::string k = impl_->data + key;
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
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(k);
  put->set_value(desired);
  put->set_lease(*lease);
  impl_->ForgetCounter(&t, key);
  t.add_failure()->mutable_request_range()->set_key(k);
  auto resp = impl_->Txn(t, "compare-set");
  if (!resp.ok()) return resp.status();
  CompareSetResult result;
  if (resp->succeeded()) {
    result.swapped = true;
    result.value = desired;
    return result;
  }
  const auto& r = resp->responses(0).response_range();
  result.value = r.kvs_size() == 0 ? expected : r.kvs(0).value();
  return result;
}

absl::StatusOr<int64_t> EtcdStore::Append(const std::string& key,
                                          const std::string& value) {
  auto job = impl_->JobLease();
  if (!job.ok()) return job.status();
  const std::string k = impl_->data + key;
  for (;;) {
    auto r = impl_->Range(k, "");
    if (!r.ok()) return r.status();
    etcdserverpb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(k);
    std::string data;
    int64_t lease = *job;
    if (r->kvs_size() == 0) {
      c->set_target(Compare::CREATE);
      c->set_create_revision(0);
    } else {
      c->set_target(Compare::MOD);
      c->set_mod_revision(r->kvs(0).mod_revision());
      data = r->kvs(0).value();
      // Appending keeps the key's lease, as the embedded store keeps its TTL.
      if (r->kvs(0).lease() != 0) lease = r->kvs(0).lease();
    }
    data += value;
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(k);
    put->set_value(data);
    put->set_lease(lease);
    impl_->ForgetCounter(&t, key);
    auto resp = impl_->Txn(t, "append");
    if (!resp.ok()) return resp.status();
    if (resp->succeeded()) return static_cast<int64_t>(data.size());
  }
}

absl::StatusOr<bool> EtcdStore::Check(const std::vector<std::string>& keys) {
  bool all = true;
  auto s = ForEachTxnChunk(keys.size(), [&](size_t first, size_t last) {
    if (!all) return absl::OkStatus();
    etcdserverpb::TxnRequest t;
    for (size_t i = first; i < last; ++i) {
      auto* r = t.add_success()->mutable_request_range();
      r->set_key(impl_->data + keys[i]);
      r->set_count_only(true);
    }
    auto resp = impl_->Txn(t, "check");
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
  {
    absl::MutexLock lock(&impl_->mu);
    for (const auto& k : keys) impl_->ttl_writes.erase(impl_->data + k);
  }
  int64_t deleted = 0;
  auto s = ForEachTxnChunk(
      keys.size(),
      [&](size_t first, size_t last) {
        etcdserverpb::TxnRequest t;
        for (size_t i = first; i < last; ++i) {
          t.add_success()->mutable_request_delete_range()->set_key(impl_->data +
                                                                   keys[i]);
          impl_->ForgetCounter(&t, keys[i]);
        }
        auto resp = impl_->Txn(t, "delete");
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
  auto r = impl_->Range(impl_->data, PrefixEnd(impl_->data), true);
  if (!r.ok()) return r.status();
  return r->count();
}

absl::StatusOr<StoreListing> EtcdStore::ListPage(const std::string& prefix,
                                                 const std::string& start_after,
                                                 size_t limit) {
  const std::string p = impl_->data + prefix;
  // From the key after `start_after` (itself followed by a NUL byte). etcd
  // pages by `limit` itself (0: the whole range, its own page).
  auto r = impl_->Range(start_after.empty() || start_after < prefix
                            ? p
                            : impl_->data + start_after + std::string(1, '\0'),
                        PrefixEnd(p), false,
                        static_cast<int64_t>(std::min<size_t>(
                            limit, std::numeric_limits<int64_t>::max())));
  if (!r.ok()) return r.status();
  int64_t job;
  {
    absl::MutexLock lock(&impl_->mu);
    job = impl_->job_lease;
  }
  StoreListing out;
  out.revision = r->header().revision();
  out.more = r->more();
  for (const auto& kv : r->kvs()) {
    StoreEntry e;
    e.key = kv.key().substr(impl_->data.size());
    e.value = kv.value();
    e.revision = kv.mod_revision();
    // Every TTL'd write gets a fresh lease, so the lease's age is the
    // key's age on etcd's clock (to the second).
    if (kv.lease() != 0 && kv.lease() != job) {
      std::optional<Impl::LeaseInfo> info;
      {
        absl::MutexLock lock(&impl_->mu);
        auto it = impl_->lease_info.find(kv.lease());
        // Past its expiry the lease was renewed (Renew): look it up again.
        if (it != impl_->lease_info.end() && it->second.expires > absl::Now()) {
          info = it->second;
        }
      }
      if (!info.has_value()) {
        auto ttl = impl_->TimeToLive(kv.lease());
        if (ttl.ok() && ttl->first > 0) {
          info = Impl::LeaseInfo{absl::Now() + absl::Seconds(ttl->first),
                                 absl::Seconds(ttl->second)};
          absl::MutexLock lock(&impl_->mu);
          if (impl_->lease_info.size() > 4096) impl_->lease_info.clear();
          impl_->lease_info[kv.lease()] = *info;
        }
      }
      if (info.has_value()) {
        e.ttl_left =
            std::max(absl::ZeroDuration(), info->expires - absl::Now());
        e.age = std::max(absl::ZeroDuration(), info->granted - e.ttl_left);
      }
    }
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
    const std::string p = impl_->data + prefix;
    ranges.emplace_back(p, PrefixEnd(p));
  }
  WatchResult out;
  if (timeout <= absl::ZeroDuration()) {
    // No time to open a watch: answer from a read (a deletion since
    // `after_revision` shows only as a later revision of another key).
    for (const auto& [key, end] : ranges) {
      auto r = impl_->Range(key, end);
      if (!r.ok()) return r.status();
      for (const auto& kv : r->kvs()) {
        out.changed = out.changed || kv.mod_revision() > after_revision;
      }
      out.revision = std::max(out.revision, r->header().revision());
    }
    return out;
  }
  auto w = impl_->WatchRange(ranges, after_revision, timeout);
  if (!w.ok()) return w.status();
  out.changed = w->first;
  out.revision = w->second;
  return out;
}

}  // namespace distjob
