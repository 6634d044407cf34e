#include "rendezvous/store/etcd_store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
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
#include "rendezvous/store/pem_files.h"

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

// Read and parsed here, at start: a file that is not PEM would otherwise
// only show as handshakes failing until the join timeout.
absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view what) {
  const std::string flag = absl::StrCat("--rdzv-conf ", what);
  return what == "key" ? ReadPemPrivateKey(flag, path)
                       : ReadPemCertificates(flag, path);
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

// A counter's count from its sequence key (see Add): base + version - 1.
std::optional<int64_t> CounterOf(const mvccpb::KeyValue& seq) {
  int64_t base = 0;
  if (!absl::SimpleAtoi(seq.value(), &base)) return std::nullopt;
  return base + seq.version() - 1;
}
std::optional<int64_t> CounterOf(const etcdserverpb::RangeResponse& seq) {
  if (seq.kvs_size() == 0) return std::nullopt;
  return CounterOf(seq.kvs(0));
}

// What a reader sees of a key, from the ranges of its value (`kv/<key>`)
// and its sequence (`ctr/<key>`) read in one transaction: a counter's value
// write lags its adds (and is lost with an adder that dies between its two
// writes), the sequence never does.
std::optional<std::string> ValueOf(const etcdserverpb::RangeResponse& value,
                                   const etcdserverpb::RangeResponse& seq) {
  if (auto n = CounterOf(seq); n.has_value()) return absl::StrCat(*n);
  if (value.kvs_size() == 0) return std::nullopt;
  return value.kvs(0).value();
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
  // <prefix>/<run_id>/agent/adds/<this client's random id>/: each add's
  // marker (see Add), so a retried add counts once.
  std::string adds;
  std::atomic<uint64_t> next_add{0};
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
    s->channel = options.test_hooks.interceptors
                     ? grpc::experimental::CreateCustomChannelWithInterceptors(
                           target->target, creds, args,
                           options.test_hooks.interceptors())
                     : grpc::CreateCustomChannel(target->target, creds, args);
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

  absl::Mutex mu;
  int64_t job_lease ABSL_GUARDED_BY(mu) = 0;
  // A JobLease adoption is in flight; `adoptions` counts those that ended,
  // the last failed one with `adoption_error`.
  bool adopting ABSL_GUARDED_BY(mu) = false;
  uint64_t adoptions ABSL_GUARDED_BY(mu) = 0;
  absl::Status adoption_error ABSL_GUARDED_BY(mu);
  // When that failed adoption's own caller's deadline fell, if it ended
  // past it (InfiniteFuture: it failed on its own): a waiter with more
  // time adopts again rather than take a failure that was only the
  // adopter's lack of time.
  absl::Time adoption_cut_at ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
  bool adoption_failed ABSL_GUARDED_BY(mu) = false;  // the last one
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
  std::thread keeper ABSL_GUARDED_BY(mu);

  std::string Endpoints() const {
    std::vector<std::string> eps;
    for (const auto& m : members) eps.push_back(m.endpoint);
    return absl::StrJoin(eps, ",");
  }

  // Runs `call` on one member after another until one answers or `budget`
  // is spent; a member that is down or has lost quorum is skipped.
  // `retried`, when given, is set on any attempt that failed in a way that
  // may still have applied it (a transport failure, retried or not).
  template <typename F>
  absl::Status Call(absl::string_view what, absl::Duration budget, F call,
                    bool* retried = nullptr) {
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
      const size_t i = current.load() % members.size();
      grpc::ClientContext ctx;
      const absl::Time attempt_deadline =
          std::min(deadline, absl::Now() + attempt_cap);
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
      if (retried != nullptr) *retried = true;
      if (last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
          attempt_cap < absl::Seconds(40)) {
        attempt_cap *= 2;
      }
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
      const etcdserverpb::TxnRequest& req, absl::string_view what,
      bool* retried = nullptr) {
    etcdserverpb::TxnResponse resp;
    auto s = Call(
        what, options.rpc_timeout,
        [&](auto& kv, auto&, grpc::ClientContext* ctx) {
          resp.Clear();
          return kv.Txn(ctx, req, &resp);
        },
        retried);
    if (!s.ok()) return s;
    return resp;
  }

  // `limit`: at most this many keys (0: all), `more` in the answer when
  // the range holds more.
  // `revision`: as of that revision (0: now).
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    const std::string& end,
                                                    bool count_only = false,
                                                    int64_t limit = 0,
                                                    int64_t revision = 0) {
    etcdserverpb::RangeRequest req;
    req.set_key(key);
    req.set_range_end(end);
    req.set_count_only(count_only);
    req.set_limit(limit);
    req.set_revision(revision);
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
    // A goodbye: a lease not revoked expires after its TTL.
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

  // Lease renewals (KeepAlive) go as messages on one long-lived
  // LeaseKeepAlive stream per client, written by one thread and read by
  // another: a stream per renewal cost etcd a stream's set-up and
  // tear-down per node heartbeat, and 4,096 simulated nodes did not close
  // a round within 45 s (bench/run.py, etcd). A broken stream fails the
  // renewals it carried (their callers retry on a fresh one, at the next
  // member); a stream that leaves a renewal unanswered for a whole attempt
  // is taken for dead and replaced.
  struct Renewal {
    int64_t id = 0;
    bool done = false;
    bool alive = false;
    grpc::Status failed;  // done, unanswered: the stream broke
  };
  struct RenewalStream {
    grpc::ClientContext ctx;
    std::unique_ptr<
        grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                 etcdserverpb::LeaseKeepAliveResponse>>
        stream;
    size_t member = 0;
    std::thread reader;
    bool broken = false;  // guarded by renew_mu
  };
  absl::Mutex renew_mu;
  // Renewals not yet written, and those written awaiting their answer (by
  // lease, in the order written: etcd answers a stream's renewals in turn;
  // nullptr: one written whose caller gave up, so that its late answer is
  // not taken for the next renewal's, sent after it).
  std::deque<Renewal*> renew_queue ABSL_GUARDED_BY(renew_mu);
  std::unordered_map<int64_t, std::deque<Renewal*>> renew_waiting
      ABSL_GUARDED_BY(renew_mu);
  bool renew_stop ABSL_GUARDED_BY(renew_mu) = false;
  bool renew_replace ABSL_GUARDED_BY(renew_mu) = false;
  // When the stream last answered (or was opened).
  absl::Time renew_answered ABSL_GUARDED_BY(renew_mu);
  std::thread renew_writer;  // started by the first renewal
  // A bound on renewals queued at once (a client shared by thousands of
  // simulated nodes queues one per node heartbeat).
  static constexpr size_t kMaxQueuedRenewals = 1 << 16;
  // Renewals of one lease written and not answered.
  static constexpr size_t kMaxUnansweredRenewals = 64;

  // Fails the renewals written to a stream that broke; with `queued`, the
  // ones not written yet too (no stream, or the client closes).
  void FailRenewalsLocked(const grpc::Status& why, bool queued = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(renew_mu) {
    for (auto& [id, waiters] : renew_waiting) {
      for (Renewal* r : waiters) {
        if (r == nullptr) continue;
        r->done = true;
        r->failed = why;
      }
    }
    renew_waiting.clear();
    if (!queued) return;
    for (Renewal* r : renew_queue) {
      r->done = true;
      r->failed = why;
    }
    renew_queue.clear();
  }

  void ReadRenewals(RenewalStream* s) {
    etcdserverpb::LeaseKeepAliveResponse resp;
    while (s->stream->Read(&resp)) {
      absl::MutexLock lock(&renew_mu);
      renew_answered = absl::Now();
      auto it = renew_waiting.find(resp.id());
      if (it == renew_waiting.end()) continue;
      Renewal* r = it->second.front();
      it->second.pop_front();
      if (it->second.empty()) renew_waiting.erase(it);
      if (r == nullptr) continue;  // its caller gave up
      r->done = true;
      r->alive = resp.ttl() > 0;
    }
    absl::MutexLock lock(&renew_mu);
    s->broken = true;
    FailRenewalsLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "etcd lease keep-alive stream ended"));
  }

  // Ends `s`: cancels it, waits for its reader, and notes how it ended
  // against its member (a failure moves the client to the next member).
  void EndRenewalStream(std::unique_ptr<RenewalStream> s) {
    if (s == nullptr) return;
    s->ctx.TryCancel();
    if (s->reader.joinable()) s->reader.join();
    const grpc::Status st = s->stream->Finish();
    Unregister(&s->ctx);
    bool failed;
    {
      absl::MutexLock lock(&renew_mu);
      failed = !renew_stop;
    }
    if (failed) {
      DJ_LOG_DEBUG("etcd lease keep-alive stream at {} ended: {}",
                   members[s->member].endpoint, st.error_message());
      NoteResult(s->member, false);
      size_t seen = s->member;
      current.compare_exchange_strong(seen, (s->member + 1) % members.size());
    }
  }

  void WriteRenewals() {
    std::unique_ptr<RenewalStream> s;
    absl::MutexLock lock(&renew_mu);
    for (;;) {
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(renew_mu) {
        return renew_stop || renew_replace || !renew_queue.empty() ||
               (s != nullptr && s->broken);
      };
      renew_mu.Await(absl::Condition(&ready));
      if (renew_stop || renew_replace || (s != nullptr && s->broken)) {
        renew_replace = false;
        if (s != nullptr) {
          FailRenewalsLocked(
              grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           "etcd lease keep-alive stream replaced"));
          renew_mu.Unlock();
          EndRenewalStream(std::move(s));
          renew_mu.Lock();
        }
        if (renew_stop) {
          FailRenewalsLocked(
              grpc::Status(grpc::StatusCode::CANCELLED, "etcd store closed"),
              true);
          return;
        }
        continue;
      }
      if (s == nullptr) {
        renew_mu.Unlock();
        s = OpenRenewalStream();
        renew_mu.Lock();
        renew_answered = absl::Now();
        if (s == nullptr) {
          FailRenewalsLocked(
              grpc::Status(
                  grpc::StatusCode::UNAVAILABLE,
                  absl::StrCat(
                      "etcd lease keep-alive: no stream to ",
                      members[current.load() % members.size()].endpoint)),
              true);
          continue;
        }
      }
      std::vector<Renewal*> batch(renew_queue.begin(), renew_queue.end());
      renew_queue.clear();
      std::vector<int64_t> ids;
      for (Renewal* r : batch) {
        renew_waiting[r->id].push_back(r);
        ids.push_back(r->id);
      }
      renew_mu.Unlock();
      bool wrote = true;
      for (size_t i = 0; i < ids.size() && wrote; ++i) {
        etcdserverpb::LeaseKeepAliveRequest req;
        req.set_id(ids[i]);
        grpc::WriteOptions options;
        // Coalesced: the batch goes out in as few frames as it can.
        if (i + 1 < ids.size()) options.set_buffer_hint();
        wrote = s->stream->Write(req, options);
      }
      renew_mu.Lock();
      if (!wrote) s->broken = true;
    }
  }

  std::unique_ptr<RenewalStream> OpenRenewalStream() {
    const size_t i = current.load() % members.size();
    auto stubs = StubsOf(i);
    if (stubs->lease == nullptr) {
      NoteResult(i, false);
      size_t seen = i;
      current.compare_exchange_strong(seen, (i + 1) % members.size());
      return nullptr;
    }
    auto s = std::make_unique<RenewalStream>();
    s->member = i;
    if (!Register(&s->ctx)) return nullptr;
    s->stream = stubs->lease->LeaseKeepAlive(&s->ctx);
    RenewalStream* raw = s.get();
    s->reader = std::thread([this, raw] { ReadRenewals(raw); });
    return s;
  }

  // One keep-alive of lease `id` on the client's renewal stream; false
  // when etcd no longer knows the lease.
  absl::StatusOr<bool> KeepAlive(int64_t id) {
    // read_timeout, as every other call: a renewal etcd does not answer
    // within it is the store lost (DynamicRendezvous::RenewLease), not a
    // wait of its own.
    const absl::Time start = absl::Now();
    const absl::Duration budget = options.rpc_timeout;
    const absl::Time deadline =
        std::min(start + budget, ScopedCallDeadline::Current());
    const bool whole_attempt = deadline == start + budget;
    grpc::Status last;
    Backoff backoff(absl::Milliseconds(50), absl::Seconds(1));
    for (bool first = true; first || absl::Now() < deadline; first = false) {
      if (!first) {
        absl::SleepFor(std::min(backoff.Next(), deadline - absl::Now()));
      }
      Renewal r;
      r.id = id;
      absl::MutexLock lock(&renew_mu);
      if (renew_stop) {
        return absl::CancelledError(
            "etcd lease keep-alive: the store was closed");
      }
      if (renew_queue.size() >= kMaxQueuedRenewals) {
        return absl::UnavailableError(
            absl::StrCat("etcd lease keep-alive: ", renew_queue.size(),
                         " renewals queued already"));
      }
      if (!renew_writer.joinable()) {
        renew_writer = std::thread([this] { WriteRenewals(); });
      }
      renew_queue.push_back(&r);
      if (!renew_mu.AwaitWithDeadline(absl::Condition(&r.done), deadline)) {
        // Still queued or awaiting its answer: withdrawn.
        auto q = std::find(renew_queue.begin(), renew_queue.end(), &r);
        if (q != renew_queue.end()) renew_queue.erase(q);
        auto it = renew_waiting.find(id);
        if (it != renew_waiting.end()) {
          // Written: its answer may still come, and is its own.
          auto w = std::find(it->second.begin(), it->second.end(), &r);
          if (w != it->second.end()) *w = nullptr;
          // So many unanswered that the stream is taken for dead, whatever
          // the callers' deadlines: the slots go with it.
          if (it->second.size() > kMaxUnansweredRenewals) renew_replace = true;
        }
        // A stream that answered nothing while a renewal waited a whole
        // attempt is taken for dead (a connection lost without a reset); one
        // that answers late is only slow (an overloaded etcd).
        if (whole_attempt && absl::Now() - renew_answered >= budget) {
          renew_replace = true;
        }
        return absl::UnavailableError(absl::StrCat(
            "etcd cluster ", Endpoints(),
            " unreachable for lease keep-alive: no answer before the deadline",
            last.ok() ? "" : absl::StrCat(" (", last.error_message(), ")")));
      }
      if (r.failed.ok()) return r.alive;
      last = r.failed;
      if (last.error_code() == grpc::StatusCode::CANCELLED) {
        return absl::CancelledError(
            "etcd lease keep-alive: the store was closed");
      }
    }
    return absl::UnavailableError(absl::StrCat(
        "etcd cluster ", Endpoints(),
        " unreachable for lease keep-alive: ", last.error_message()));
  }

  // One adoption per client at a time: callers that arrive meanwhile take
  // its outcome, lease or failure, where each would otherwise grant and
  // register a holder lease of its own (thousands at once from a client
  // that bench/store_bench.cc shares between simulated nodes) or redo a
  // failed adoption one after another. A waiter keeps to its own deadline
  // (ScopedCallDeadline) and to Close, and adopts again where the adopter
  // failed past a deadline earlier than the waiter's.
  absl::StatusOr<int64_t> JobLease() {
    const absl::Time deadline = ScopedCallDeadline::Current();
    {
      absl::MutexLock lock(&mu);
      for (;;) {
        if (job_lease != 0) return job_lease;
        if (closed) return absl::FailedPreconditionError("etcd store closed");
        if (!adopting) break;
        const uint64_t awaited = adoptions;
        if (options.test_hooks.lease_wait) options.test_hooks.lease_wait();
        auto over = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
          return adoptions != awaited || closed;
        };
        const bool ended =
            mu.AwaitWithDeadline(absl::Condition(&over), deadline);
        if (job_lease != 0) return job_lease;
        if (closed) return absl::FailedPreconditionError("etcd store closed");
        if (!ended) {
          return absl::DeadlineExceededError(absl::StrCat(
              "etcd job lease ", meta,
              "lease: another call's adoption of it did not end before this "
              "call's deadline"));
        }
        if (adoption_failed && adoption_cut_at >= deadline) {
          return adoption_error;
        }
        // Its adopter ran out of time and this call has more, or the lease
        // it adopted was lost since (KeepAliveLoop): adopt (or wait for
        // another waiter that does).
      }
      adopting = true;
    }
    auto adopted = AdoptJobLease();
    absl::MutexLock lock(&mu);
    adopting = false;
    ++adoptions;
    adoption_failed = !adopted.ok();
    if (!adopted.ok()) {
      adoption_error = adopted.status();
      adoption_cut_at =
          absl::Now() >= deadline ? deadline : absl::InfiniteFuture();
    }
    return adopted;
  }

  absl::StatusOr<int64_t> AdoptJobLease() {
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
    if (options.test_hooks.adopted) options.test_hooks.adopted();
    absl::MutexLock lock(&mu);
    job_lease = id;
    own_lease = *own;
    // Closed while this adopted: Close waits for the adoption to end
    // (`adopting`) before it reads the leases, so it revokes this one; a
    // keeper started now would never be joined.
    if (closed) {
      return absl::CancelledError(
          absl::StrCat("etcd job lease ", meta,
                       "lease: the store was closed while joining"));
    }
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
  // a lease grant, a put and a lease expiry per heartbeat. Keys of the same
  // write that this client has not written under that lease yet (a key the
  // heartbeat adds, a new value) are put under it in the renewal's
  // transaction: a new lease for them would cost etcd a grant, a Raft
  // commit, per node (4,096 nodes' heartbeats that add their waiting key).
  // The revision when renewed; nullopt when the keys must be written with
  // a lease of their own (first write, another TTL or lease, a kept key
  // deleted or overwritten by another client since, the lease gone).
  absl::StatusOr<std::optional<int64_t>> Renew(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) {
    if (kvs.size() > kMaxTxnOps / 2) return std::nullopt;
    int64_t lease = 0;
    std::vector<bool> kept(kvs.size(), false);
    {
      absl::MutexLock lock(&mu);
      for (size_t i = 0; i < kvs.size(); ++i) {
        auto it = ttl_writes.find(data + kvs[i].first);
        if (it == ttl_writes.end()) continue;
        if (it->second.ttl_seconds != TtlSeconds(ttl) ||
            (lease != 0 && it->second.lease != lease)) {
          return std::nullopt;
        }
        lease = it->second.lease;
        kept[i] = it->second.value == kvs[i].second;
      }
    }
    if (lease == 0) return std::nullopt;
    auto alive = KeepAlive(lease);
    if (!alive.ok()) return alive.status();
    if (!*alive) return std::nullopt;
    etcdserverpb::TxnRequest t;
    std::vector<std::pair<std::string, std::string>> written;
    for (size_t i = 0; i < kvs.size(); ++i) {
      const auto& [k, v] = kvs[i];
      if (!kept[i]) {
        auto* put = t.add_success()->mutable_request_put();
        put->set_key(data + k);
        put->set_value(v);
        put->set_lease(lease);
        ForgetCounter(&t, k);
        written.push_back(kvs[i]);
        continue;
      }
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
    // NotFound: the lease ran out since its keep-alive.
    if (!resp.ok() && resp.status().code() == absl::StatusCode::kNotFound) {
      return std::nullopt;
    }
    if (!resp.ok()) return resp.status();
    if (!resp->succeeded()) return std::nullopt;
    if (!written.empty()) NoteTtlWrites(written, ttl, lease);
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

  using Ranges = std::vector<std::pair<std::string, std::string>>;

  // A Watch that answers when anything in one of `ranges` (key, range
  // end) changes after `after_revision`, or {false, revision} at
  // `timeout` or the caller's deadline (ScopedCallDeadline), whichever is
  // first: one watcher per range on one stream. Unavailable, naming the
  // cluster, when the last member tried failed (a transport error since
  // any member last answered): "no change" from a cluster no one could
  // reach kept the rendezvous monitor from ever seeing etcd lost. A stream
  // that the deadline ended before etcd answered it is no sign of either.
  absl::StatusOr<std::pair<bool, int64_t>> WatchRange(const Ranges& ranges,
                                                      int64_t after_revision,
                                                      absl::Duration timeout) {
    if (ScopedCallDeadline::Current() <= absl::Now()) {
      return absl::DeadlineExceededError(
          absl::StrCat("etcd watch at ", Endpoints(),
                       ": the caller's deadline passed before it began"));
    }
    const absl::Time deadline =
        std::min(absl::Now() + timeout, ScopedCallDeadline::Current());
    int64_t revision = after_revision;
    grpc::Status failed;  // OK: none since a member last answered
    for (size_t attempt = 1; absl::Now() < deadline; ++attempt) {
      const size_t i = current.load() % members.size();
      WatchAttempt a;
      if (!WatchOnce(i, ranges, after_revision, deadline, &revision, &a)) {
        return absl::CancelledError("etcd watch: the store was closed");
      }
      NoteResult(i, a.changed || !Retryable(a.status));
      if (a.changed) return std::make_pair(true, revision);
      if (a.answered) failed = grpc::Status::OK;
      // Cancelled: by this call's own deadline, or by Close (the next
      // attempt says so).
      if (a.status.error_code() != grpc::StatusCode::CANCELLED) {
        if (!Retryable(a.status)) return FromGrpcStatus(a.status);
        failed = a.status;
      }
      if (absl::Now() >= deadline) break;
      DJ_LOG_DEBUG("etcd watch at {}: {}", members[i].endpoint,
                   a.status.error_message());
      size_t seen = i;
      current.compare_exchange_strong(seen, (i + 1) % members.size());
      if (attempt % members.size() == 0) {
        absl::SleepFor(
            std::min(absl::Milliseconds(200), deadline - absl::Now()));
      }
    }
    if (!failed.ok()) {
      return absl::UnavailableError(
          absl::StrCat("etcd cluster ", Endpoints(),
                       " unreachable for watch: ", failed.error_message()));
    }
    return std::make_pair(false, revision);
  }

  struct WatchAttempt {
    bool answered = false;  // etcd answered a create request
    bool changed = false;
    grpc::Status status;  // how the stream ended
  };

  // One watch stream at member `i`, until a change under `ranges` after
  // `after_revision` or `deadline`. False when the store was closed.
  bool WatchOnce(size_t i, const Ranges& ranges, int64_t after_revision,
                 absl::Time deadline, int64_t* revision, WatchAttempt* out) {
    grpc::ClientContext ctx;
    auto stubs = StubsOf(i);
    if (!Register(&ctx)) return false;
    if (stubs->watch == nullptr) {
      Unregister(&ctx);
      out->status = stubs->unresolved;
      return true;
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
    etcdserverpb::WatchResponse resp;
    while (written && !out->changed && stream->Read(&resp)) {
      out->answered = true;
      *revision = std::max(*revision, resp.header().revision());
      if (resp.events_size() > 0 || resp.compact_revision() > 0 ||
          resp.canceled()) {
        out->changed = true;
        for (const auto& e : resp.events()) {
          *revision = std::max(*revision, e.kv().mod_revision());
        }
      }
    }
    done.Notify();
    timer.join();
    ctx.TryCancel();
    out->status = stream->Finish();
    Unregister(&ctx);
    return true;
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
  std::random_device random;
  impl->adds = absl::StrCat(impl->meta, "adds/", absl::Hex(random()),
                            absl::Hex(random()), "/");
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
    ttl = impl_->ttl_leases;
  }
  impl_->CancelAll();
  std::thread keeper;
  {
    // An adoption of the job lease under way ends at its next call, which
    // CancelAll refuses; its leases are read only after it, so that the
    // holder lease it granted is revoked below, and it starts no keeper.
    absl::MutexLock lock(&impl_->mu);
    impl_->mu.Await(absl::Condition(
        +[](bool* adopting) { return !*adopting; }, &impl_->adopting));
    job = impl_->job_lease;
    own = impl_->own_lease;
    keeper = std::move(impl_->keeper);
  }
  {
    absl::MutexLock lock(&impl_->renew_mu);
    impl_->renew_stop = true;
  }
  if (impl_->renew_writer.joinable()) impl_->renew_writer.join();
  if (keeper.joinable()) keeper.join();
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
    auto s = ForEachTxnChunk(
        keys.size(),
        [&](size_t first, size_t last) {
          etcdserverpb::TxnRequest t;
          for (size_t i = first; i < last; ++i) {
            // With its counter's sequence, if any (ValueOf).
            t.add_success()->mutable_request_range()->set_key(impl_->data +
                                                              keys[i]);
            t.add_success()->mutable_request_range()->set_key(impl_->counters +
                                                              keys[i]);
          }
          auto resp = impl_->Txn(t, "get");
          if (!resp.ok()) return resp.status();
          if (revision < 0) revision = resp->header().revision();
          for (int i = 0; i + 1 < resp->responses_size(); i += 2) {
            auto v = ValueOf(resp->responses(i).response_range(),
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
// mod_revision is still this add's), so the value never goes back. That
// write can lag, or be lost with an agent that dies between the two
// writes: every read of a counter (MultiGet, CompareSet, Append, ListPage)
// ranges the sequence in the same transaction and takes the count from it
// (ValueOf), so reads are exact; the value is there for watchers and for
// key counts. Other deltas and the first add compare-and-swap both keys.
//
// A transport failure after an add committed (its answer lost) is retried
// by Call at the next member: each add therefore writes a marker key of its
// own in the transaction that applies it, which requires the marker absent,
// so a retry applies nothing and finds the marker instead. Where the
// retries fail too, the add settles its outcome by writing the marker
// itself: the add can no longer apply once it exists. A marker is deleted
// again (with the value write) only when its add's transaction was sent
// once: after a transport failure an earlier attempt may still be in
// flight and commit later, and only the marker keeps it from counting
// twice, so such a marker stays until the job's lease ends (one key per
// retried add).
absl::StatusOr<int64_t> EtcdStore::Add(const std::string& key, int64_t delta) {
  auto lease = impl_->JobLease();
  if (!lease.ok()) return lease.status();
  const std::string k = impl_->data + key;
  const std::string seq = impl_->counters + key;
  const std::string marker = absl::StrCat(impl_->adds, impl_->next_add++);
  auto not_integer = [&] {
    return absl::FailedPreconditionError(
        absl::StrCat("key '", key, "' does not hold an integer"));
  };
  // The transaction that applies the add requires the marker absent and
  // writes it; its failure branch reads it (responses(0)).
  auto with_marker = [&](etcdserverpb::TxnRequest* t) {
    auto* c = t->add_compare();
    c->set_key(marker);
    c->set_target(Compare::CREATE);
    c->set_create_revision(0);
    auto* put = t->add_success()->mutable_request_put();
    put->set_key(marker);
    put->set_lease(*lease);
    t->add_failure()->mutable_request_range()->set_key(marker);
  };
  auto marked =
      [](const etcdserverpb::TxnResponse& r) -> std::optional<int64_t> {
    if (r.succeeded() || r.responses_size() == 0 ||
        r.responses(0).response_range().kvs_size() == 0) {
      return std::nullopt;
    }
    return r.responses(0).response_range().kvs(0).create_revision();
  };
  // After a transport failure: the revision the add committed at, or the
  // failure once the add is sure never to apply.
  auto settle = [&](const absl::Status& failed) -> absl::StatusOr<int64_t> {
    if (failed.code() == absl::StatusCode::kCancelled) return failed;
    etcdserverpb::TxnRequest f;
    auto* c = f.add_compare();
    c->set_key(marker);
    c->set_target(Compare::CREATE);
    c->set_create_revision(0);
    auto* put = f.add_success()->mutable_request_put();
    put->set_key(marker);
    put->set_value("void");
    put->set_lease(*lease);
    f.add_failure()->mutable_request_range()->set_key(marker);
    auto r = impl_->Txn(f, "add (settle)");
    if (!r.ok()) {
      return absl::UnavailableError(
          absl::StrCat("etcd add to '", key, "': outcome unknown (",
                       failed.message(), "; then ", r.status().message(), ")"));
    }
    if (auto at = marked(*r); at.has_value()) return *at;
    return failed;
  };
  // Whether an attempt of this add may still commit (see above).
  bool retried = false;
  auto forget_marker = [&] {
    if (retried) return;
    etcdserverpb::TxnRequest t;
    t.add_success()->mutable_request_delete_range()->set_key(marker);
    if (auto s = impl_->Txn(t, "add (marker)"); !s.ok()) {
      DJ_LOG_DEBUG("etcd add {}: {}", key, s.status());
    }
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
      with_marker(&t);
      auto resp = impl_->Txn(t, "add", &retried);
      std::optional<int64_t> committed;
      std::optional<int64_t> result;
      if (!resp.ok()) {
        retried = true;
        auto at = settle(resp.status());
        if (!at.ok()) return at.status();
        committed = *at;
      } else if (resp->succeeded()) {
        const auto& prev = resp->responses(0).response_put().prev_kv();
        int64_t base = 0;
        if (!absl::SimpleAtoi(prev.value(), &base)) return not_integer();
        committed = resp->header().revision();
        result = base + prev.version();
      } else {
        committed = marked(*resp);
      }
      if (committed.has_value()) {
        if (!result.has_value()) {
          // Committed by an attempt whose answer was lost: the count as of
          // that commit.
          auto then = impl_->Range(seq, "", false, 0, *committed);
          if (!then.ok()) return then.status();
          result = CounterOf(*then);
          if (!result.has_value()) return not_integer();
        }
        etcdserverpb::TxnRequest w;
        c = w.add_compare();
        c->set_key(seq);
        c->set_target(Compare::MOD);
        c->set_mod_revision(*committed);
        put = w.add_success()->mutable_request_put();
        put->set_key(k);
        put->set_value(absl::StrCat(*result));
        put->set_lease(*lease);
        if (!retried) {
          w.add_success()->mutable_request_delete_range()->set_key(marker);
          w.add_failure()->mutable_request_delete_range()->set_key(marker);
        }
        // The add has happened: a failure here leaves the value behind
        // (reads take the count from the sequence) and must not make the
        // caller add again.
        if (auto s = impl_->Txn(w, "add (value)"); !s.ok()) {
          DJ_LOG_WARNING("etcd add {}: {}", key, s.status());
        }
        return *result;
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
    with_marker(&t);
    auto resp = impl_->Txn(t, "add", &retried);
    if (!resp.ok()) {
      retried = true;
      auto at = settle(resp.status());
      if (!at.ok()) return at.status();
    } else if (!resp->succeeded() && !marked(*resp).has_value()) {
      continue;  // lost a race: read again
    }
    forget_marker();
    return result;
  }
}

absl::StatusOr<CompareSetResult> EtcdStore::CompareSet(
    const std::string& key, const std::string& expected,
    const std::string& desired) {
  auto lease = impl_->JobLease();
  if (!lease.ok()) return lease.status();
  const std::string k = impl_->data + key;
  const std::string seq = impl_->counters + key;
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
    auto resp = impl_->Txn(t, "compare-set");
    if (!resp.ok()) return resp.status();
    CompareSetResult result;
    if (resp->succeeded()) {
      result.swapped = true;
      result.value = desired;
      return result;
    }
    const auto& value = resp->responses(0).response_range();
    const auto& counter = resp->responses(1).response_range();
    std::optional<std::string> now = ValueOf(value, counter);
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
    impl_->ForgetCounter(&swap, key);
    auto swapped = impl_->Txn(swap, "compare-set");
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
  auto job = impl_->JobLease();
  if (!job.ok()) return job.status();
  const std::string k = impl_->data + key;
  const std::string seq = impl_->counters + key;
  for (;;) {
    etcdserverpb::TxnRequest read;
    read.add_success()->mutable_request_range()->set_key(k);
    read.add_success()->mutable_request_range()->set_key(seq);
    auto got = impl_->Txn(read, "append (read)");
    if (!got.ok()) return got.status();
    const auto& r = got->responses(0).response_range();
    const auto& counter = got->responses(1).response_range();
    etcdserverpb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(k);
    std::string data = ValueOf(r, counter).value_or("");
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
  // From the key after `start_after` (itself followed by a NUL byte). etcd
  // pages by `limit` itself (0: the whole range, its own page).
  const std::string from = start_after.empty() || start_after < prefix
                               ? prefix
                               : start_after + std::string(1, '\0');
  etcdserverpb::TxnRequest t;
  auto* keys = t.add_success()->mutable_request_range();
  keys->set_key(impl_->data + from);
  keys->set_range_end(PrefixEnd(impl_->data + prefix));
  keys->set_limit(static_cast<int64_t>(
      std::min<size_t>(limit, std::numeric_limits<int64_t>::max())));
  // The counters' sequences of the same span: a counter's value write lags
  // its adds (ValueOf). There are few counters: the whole span.
  auto* seqs = t.add_success()->mutable_request_range();
  seqs->set_key(impl_->counters + from);
  seqs->set_range_end(PrefixEnd(impl_->counters + prefix));
  auto resp = impl_->Txn(t, "list");
  if (!resp.ok()) return resp.status();
  const auto* r = &resp->responses(0).response_range();
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& seq : resp->responses(1).response_range().kvs()) {
    if (auto n = CounterOf(seq); n.has_value()) {
      counts[seq.key().substr(impl_->counters.size())] = *n;
    }
  }
  int64_t job;
  {
    absl::MutexLock lock(&impl_->mu);
    job = impl_->job_lease;
  }
  StoreListing out;
  out.revision = resp->header().revision();
  out.more = r->more();
  for (const auto& kv : r->kvs()) {
    StoreEntry e;
    e.key = kv.key().substr(impl_->data.size());
    auto count = counts.find(e.key);
    e.value = count == counts.end() ? kv.value() : absl::StrCat(count->second);
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
