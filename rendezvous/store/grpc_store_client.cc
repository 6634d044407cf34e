#include "rendezvous/store/grpc_store_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/resolver.h"
#include "proto/store.grpc.pb.h"
#include "rendezvous/store/store_credentials.h"
#include "rendezvous/store/tls_mismatch.h"
#include "rendezvous/store/tls_probe.h"

namespace distjob {
namespace {

namespace pb = ::distjob::store::v1;

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what,
                      absl::string_view endpoint) {
  if (s.ok()) return absl::OkStatus();
  return FromGrpcStatus(s, absl::StrCat("store ", what, " at ", endpoint));
}

// A refused token is a configuration error of this pod (or of the job),
// which no retry can fix: the message says which of the two it was.
absl::Status Refused(const grpc::Status& s, bool sent_token,
                     absl::string_view endpoint) {
  return absl::UnauthenticatedError(
      sent_token
          ? absl::StrCat("the rendezvous store at ", endpoint,
                         " refused this agent's token: every pod of the job "
                         "must use the same --rdzv-token-file or "
                         "DISTJOB_RDZV_TOKEN (",
                         s.error_message(), ")")
          : absl::StrCat("the rendezvous store at ", endpoint,
                         " requires a token: give the job's secret with "
                         "--rdzv-token-file or DISTJOB_RDZV_TOKEN (",
                         s.error_message(), ")"));
}

// A store certificate this agent does not accept is a configuration error
// too: gRPC says so only in the text of an UNAVAILABLE (the handshake's
// OpenSSL or BoringSSL reason, or its own peer-name check), so that text
// is looked for. A client certificate the store refuses reads as "Socket
// closed" under TLS 1.3, like a lost store: that one is left to the retry
// (the store's host logs it).
absl::Status CertificateRefused(const std::string& m,
                                absl::string_view endpoint) {
  const auto cause = [&m](absl::string_view from) {
    const size_t at = m.find(std::string(from));
    return at == std::string::npos ? std::string() : m.substr(at);
  };
  std::string why = cause("Peer name ");
  if (!why.empty() &&
      why.find("is not in peer certificate") != std::string::npos) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the rendezvous store at ", endpoint,
        ": its certificate does not carry the name this agent checks (", why,
        "); give --rdzv-tls-server-name a name every store certificate "
        "carries"));
  }
  if (m.find("certificate verify failed") != std::string::npos ||
      m.find("CERTIFICATE_VERIFY_FAILED") != std::string::npos) {
    why = cause("Ssl handshake failed");
    return absl::UnauthenticatedError(absl::StrCat(
        "the rendezvous store at ", endpoint,
        ": its certificate does not verify against --rdzv-tls-ca (unknown "
        "CA, expired or not yet valid): ",
        why.empty() ? m : why));
  }
  return absl::OkStatus();
}

// TLS on one side only is a configuration error of the job that no retry
// fixes. A plaintext client hears it from the TLS store (server/conn_limiter);
// a TLS client's handshake with a plaintext store fails on the first
// bytes the store sends, which OpenSSL reports as a wrong version.
absl::Status Mismatch(const grpc::Status& s, bool tls,
                      absl::string_view endpoint) {
  const std::string& m = s.error_message();
  if (!tls && m.find(kStoreSpeaksTls) != std::string::npos) {
    return absl::UnauthenticatedError(
        absl::StrCat("the rendezvous store at ", endpoint, ": ", m));
  }
  if (tls && (m.find("WRONG_VERSION_NUMBER") != std::string::npos ||
              m.find("wrong version number") != std::string::npos)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the rendezvous store at ", endpoint,
        " speaks plaintext and this agent uses TLS: use the same "
        "--rdzv-tls-* flags on every node (none, or the store host's)"));
  }
  if (tls) return CertificateRefused(m, endpoint);
  return absl::OkStatus();
}

// How long a new client retries its first connection on its own schedule.
constexpr absl::Duration kFastConnectWindow = absl::Seconds(1);
// The longest a wait for the channel's state sleeps without looking whether
// the client was closed: gRPC cannot be woken from that wait.
constexpr absl::Duration kCloseCheck = absl::Milliseconds(10);
// How long a call polls for its answer before it sleeps (Impl::Call), as
// the store's threads do for the next call (StoreLimits::busy_poll), and
// how fast the last answer must have come for it to poll at all.
constexpr absl::Duration kBusyPoll = absl::Microseconds(150);
constexpr absl::Duration kPollAfterAnswerWithin = absl::Microseconds(200);

// How long a call's first contact waits for a connecting channel to
// connect or fail before it is left to wait for ready (FirstContact).
constexpr absl::Duration kFirstContactWait = absl::Seconds(1);

// The most one answer may hold. A listing page is max_list_bytes (4 MiB)
// of keys and values plus each entry's framing, over gRPC's default 4 MiB
// cap; the agent's own gets are far smaller. A store that answers more
// is refused (RESOURCE_EXHAUSTED), never buffered.
constexpr int kMaxAnswerBytes = 16 << 20;

// How often a mutual-TLS client asks, with a handshake of its own, whether
// the store refuses its certificate, and how long that may take: well
// under the second in which a stop signal must end any wait (a store
// handshakes in milliseconds; one that does not is not refusing us).
constexpr absl::Duration kCertProbeEvery = absl::Seconds(5);
constexpr absl::Duration kCertProbeTimeout = absl::Milliseconds(500);

}  // namespace

std::string TargetAddresses(absl::string_view target) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(target, ',')) {
    absl::ConsumePrefix(&part, "ipv4:");
    absl::ConsumePrefix(&part, "ipv6:");
    absl::StrAppend(&out, out.empty() ? "" : ", ", part);
  }
  return out;
}

std::string ConnectFailure(absl::string_view grpc_message,
                           absl::string_view addrs) {
  // gRPC 1.51: "failed to connect to all addresses; last error: UNKNOWN:
  // ipv4:10.0.0.1:29400: Failed to connect to remote host: Connection
  // refused". The address is the one before the cause, when it is there.
  const size_t refused = grpc_message.find("Connection refused");
  if (refused == absl::string_view::npos) {
    return absl::StrCat("cannot connect to ", addrs, " (", grpc_message, ")");
  }
  absl::string_view addr = addrs;
  absl::string_view head = grpc_message.substr(0, refused);
  size_t scheme = head.rfind("ipv4:");
  if (scheme == absl::string_view::npos) scheme = head.rfind("ipv6:");
  if (scheme != absl::string_view::npos) {
    absl::string_view rest = head.substr(scheme + 5);
    const size_t end = rest.find(": ");
    if (end != absl::string_view::npos) addr = rest.substr(0, end);
  }
  return absl::StrCat("connection refused by ", addr);
}

struct GrpcStoreClient::Impl {
  std::string endpoint;
  absl::Duration rpc_timeout;
  StoreSecurity security;  // TLS files and the token, for the channel
  bool own_connection = false;
  bool poll_for_answers = true;
  std::string token_header;  // "Bearer <token>", or empty
  // Set once, by the first call that resolves the endpoint; read without
  // the lock only after EnsureStub returned OK.
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Store::Stub> stub;
  std::atomic<bool> tls_ready{false};   // the channel was ready once
  std::atomic<bool> ever_ready{false};  // likewise, for FirstContact
  // The addresses the endpoint resolved to (gRPC's ipv4:/ipv6: target,
  // without the scheme), for FirstContact's message.
  std::string target_addrs;
  std::string last_connect_failure;  // under mu
  // When ClientCertificateRefused may next make its own handshake.
  mutable std::atomic<int64_t> next_cert_probe_ns{0};
  // Set with `channel`: until then, ConnectSoon retries quickly.
  absl::Time fast_connect_until;
  std::atomic<bool> fast_connect_done{false};

  // Sets the call's deadline and makes sure the channel exists.
  absl::Status Prepare(grpc::ClientContext* ctx, absl::Duration blocking) {
    const absl::Time deadline = std::min(absl::Now() + blocking + rpc_timeout,
                                         ScopedCallDeadline::Current());
    Authorize(ctx);
    ctx->set_wait_for_ready(true);
    ctx->set_deadline(absl::ToChronoTime(deadline));
    if (absl::Status s = EnsureStub(deadline); !s.ok()) return s;
    ConnectSoon(deadline);
    if (absl::Status s = CheckTlsPeer(deadline); !s.ok()) return s;
    return FirstContact(deadline);
  }

  // A call waits for a connection (wait_for_ready), so against a store
  // that refuses connections it would end only at its deadline (a join's:
  // join_timeout) with "Deadline Exceeded". Until the channel has been
  // ready once, a call whose channel is failing asks why with a call that
  // does not wait, and fails with it within kFirstContactWait ("connection
  // refused by ADDR"): the join retries and says so. A channel still connecting
  // after kFirstContactWait (no answer at all) is left to the call.
  //
  // gRPC advances a connection (connect completed, the server's SETTINGS
  // read) only while a thread polls for the channel: a call waiting for it,
  // or WaitForStateChange. A call that does not wait polls nothing, and
  // between a join's attempts nothing else does but gRPC's backup poller,
  // every 5 s: slower than an attempt's own deadline (the reconnect
  // backoff, 2 s at most), so a store that came up after the first
  // refusal was never reached. A failing channel therefore gets a fresh
  // attempt and is watched until `until` before it is asked why.
  absl::Status FirstContact(absl::Time deadline) {
    if (ever_ready.load(std::memory_order_acquire)) return absl::OkStatus();
    const absl::Time until =
        std::min(deadline, absl::Now() + kFirstContactWait);
    bool attempted = false;
    for (;;) {
      {
        absl::MutexLock lock(&mu);
        if (closed) return absl::OkStatus();  // the call is cancelled
      }
      const grpc_connectivity_state state = channel->GetState(true);
      if (state == GRPC_CHANNEL_READY) {
        ever_ready.store(true, std::memory_order_release);
        return absl::OkStatus();
      }
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !attempted) {
        grpc::experimental::ChannelResetConnectionBackoff(channel.get());
        attempted = true;
      }
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && absl::Now() >= until) {
        const grpc::Status s = Probe();
        if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
          return absl::OkStatus();  // it answered: the call says the rest
        }
        if (absl::Status m = ClientCertificateRefused(); !m.ok()) return m;
        // An attempt gRPC cut short ("tcp handshaker shutdown") is no
        // cause: the last one seen is said again.
        absl::MutexLock lock(&mu);
        if (last_connect_failure.empty() ||
            s.error_message().find("shutdown") == std::string::npos) {
          last_connect_failure =
              ConnectFailure(s.error_message(), target_addrs);
        }
        return absl::UnavailableError(
            absl::StrCat("store at ", endpoint, ": ", last_connect_failure));
      }
      const absl::Time now = absl::Now();
      if (now >= until) return absl::OkStatus();
      channel->WaitForStateChange(
          state, absl::ToChronoTime(std::min(until, now + kCloseCheck)));
    }
  }

  // One call that does not wait for a connection (500 ms at most): why a
  // channel that is not ready is not.
  grpc::Status Probe() {
    grpc::ClientContext probe;
    Authorize(&probe);
    probe.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
    pb::NumKeysRequest req;
    pb::NumKeysResponse resp;
    return stub->NumKeys(&probe, req, &resp);
  }

  // gRPC waits at least 100 ms before it reconnects, whatever the channel
  // arguments say. Agents started together reach the store's host a few ms
  // before it listens, so that floor was most of a small job's rendezvous
  // (~200 ms of 220 ms at 8 nodes on loopback). For kFastConnectWindow
  // after the channel was created, a call retries after a few ms instead
  // (doubling to 100 ms); past it, the channel's own backoff goes on. The
  // calls wait here, not Connect, so that Close (a stop signal) ends the
  // wait within kCloseCheck.
  void ConnectSoon(absl::Time deadline) {
    if (fast_connect_done.load(std::memory_order_acquire)) return;
    const absl::Time until = std::min(fast_connect_until, deadline);
    absl::Duration pause = absl::Milliseconds(2);
    grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY && absl::Now() < until) {
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        absl::MutexLock lock(&mu);
        if (mu.AwaitWithTimeout(absl::Condition(&closed), pause)) return;
        pause = std::min(2 * pause, absl::Milliseconds(100));
        grpc::experimental::ChannelResetConnectionBackoff(channel.get());
      } else {
        absl::MutexLock lock(&mu);
        if (closed) return;
      }
      channel->WaitForStateChange(
          state, absl::ToChronoTime(std::min(
                     {until, absl::Now() + pause, absl::Now() + kCloseCheck})));
      state = channel->GetState(/*try_to_connect=*/true);
    }
    if (state == GRPC_CHANNEL_READY || absl::Now() >= fast_connect_until) {
      fast_connect_done.store(true, std::memory_order_release);
    }
  }
  // A call waits for a connection (wait_for_ready), so a TLS handshake
  // that fails never reaches it: until the channel has been ready once, a
  // TLS client looks at why it is not, with a call that does not wait.
  absl::Status CheckTlsPeer(absl::Time deadline) {
    if (!security.tls() || tls_ready.load(std::memory_order_acquire)) {
      return absl::OkStatus();
    }
    for (;;) {
      const grpc_connectivity_state state = channel->GetState(true);
      if (state == GRPC_CHANNEL_READY) {
        tls_ready.store(true, std::memory_order_release);
        return absl::OkStatus();
      }
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        const grpc::Status s = Probe();
        DJ_LOG_DEBUG("TLS store {} not ready: {} {}", endpoint,
                     static_cast<int>(s.error_code()), s.error_message());
        if (absl::Status m = Mismatch(s, true, endpoint); !m.ok()) return m;
        if (absl::Status m = ClientCertificateRefused(); !m.ok()) return m;
      }
      {
        absl::MutexLock lock(&mu);
        if (closed) return absl::OkStatus();  // the call is cancelled
      }
      const absl::Time now = absl::Now();
      if (now >= deadline) return absl::OkStatus();  // it times out
      channel->WaitForStateChange(
          state, absl::ToChronoTime(
                     std::min(deadline, now + absl::Milliseconds(250))));
    }
  }
  void Authorize(grpc::ClientContext* ctx) const {
    if (!token_header.empty()) {
      ctx->AddMetadata(kTokenMetadataKey, token_header);
    }
  }
  absl::Status Check(const grpc::Status& s, absl::string_view what) const {
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      return Refused(s, !token_header.empty(), endpoint);
    }
    if (absl::Status m = Mismatch(s, security.tls(), endpoint); !m.ok()) {
      return m;
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      if (absl::Status m = ClientCertificateRefused(); !m.ok()) return m;
    }
    return FromGrpc(s, what, endpoint);
  }
  // With mutual TLS, a store that refuses this agent's certificate reads
  // as a closed socket under TLS 1.3 (tls_probe.h): one handshake of our
  // own, at most every kCertProbeEvery, reads the store's alert.
  absl::Status ClientCertificateRefused() const {
    if (!security.tls() || security.ca_pem.empty()) return absl::OkStatus();
    const int64_t now = absl::ToUnixNanos(absl::Now());
    int64_t next = next_cert_probe_ns.load(std::memory_order_relaxed);
    if (now < next ||
        !next_cert_probe_ns.compare_exchange_strong(
            next, now + absl::ToInt64Nanoseconds(kCertProbeEvery))) {
      return absl::OkStatus();
    }
    // Set before any call is made (EnsureStub), as `stub`.
    const std::string address = target_addrs.substr(0, target_addrs.find(", "));
    if (address.empty()) return absl::OkStatus();
    const std::string alert =
        ClientCertificateRefusal(address, security, kCertProbeTimeout);
    if (alert.empty()) return absl::OkStatus();
    return absl::UnauthenticatedError(absl::StrCat(
        "the rendezvous store at ", endpoint,
        " refused this agent's client certificate (", alert,
        "): --rdzv-tls-cert must be signed by a CA in the store host's "
        "--rdzv-tls-ca; use the same --rdzv-tls-* files on every node"));
  }

  // The endpoint's name goes through the agent's resolver, never gRPC's
  // (see common/resolver.h); a name that does not resolve yet (the host's
  // pod is not Ready) is looked up again until `deadline`. The addresses
  // are kept: the store lives in one agent, and when it goes the store is
  // lost whatever its next address would be.
  absl::Status EnsureStub(absl::Time deadline) {
    for (;;) {
      {
        absl::MutexLock lock(&channel_mu);
        if (stub != nullptr) return absl::OkStatus();
      }
      const absl::Duration left = deadline - absl::Now();
      // Close() (a stop signal) ends the look-up too.
      auto target = ResolveGrpcEndpoint(
          endpoint, std::clamp(left, absl::Milliseconds(100), absl::Seconds(2)),
          [this] {
            absl::MutexLock closed_lock(&mu);
            return closed;
          });
      if (target.ok()) {
        grpc::ChannelArguments args;
        // Reconnect quickly while the host comes up; the default backoff
        // grows to two minutes, longer than a join timeout wants to wait.
        args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
        args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
        args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
        args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
        args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
        args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
        if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
        // The host's name, not its address, as with a name target (TLS
        // checks the certificate against target->host).
        args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target->authority);
        if (security.tls() && security.server_name.empty()) {
          args.SetSslTargetNameOverride(target->host);
        }
        auto credentials = MakeChannelCredentials(security, &args);
        auto created =
            grpc::CreateCustomChannel(target->target, credentials, args);
        {
          absl::MutexLock lock(&channel_mu);
          if (stub != nullptr) return absl::OkStatus();  // another call won
          channel = created;
          target_addrs = TargetAddresses(target->target);
          fast_connect_until = absl::Now() + kFastConnectWindow;
          stub = pb::Store::NewStub(channel);
        }
        // Start connecting; the calls wait for it (ConnectSoon).
        created->GetState(/*try_to_connect=*/true);
        return absl::OkStatus();
      }
      if (target.status().code() != absl::StatusCode::kNotFound) {
        return target.status();
      }
      {
        absl::MutexLock closed_lock(&mu);
        if (closed) {
          return absl::CancelledError(
              absl::StrCat("store at ", endpoint, ": the client was closed"));
        }
      }
      const absl::Duration pause =
          std::min(absl::Milliseconds(200), deadline - absl::Now());
      if (pause <= absl::ZeroDuration()) {
        return absl::UnavailableError(absl::StrCat("store at ", endpoint, ": ",
                                                   target.status().message()));
      }
      absl::SleepFor(pause);
    }
  }

  // One unary call on a completion queue of its own, as gRPC's blocking
  // call makes one; but when the store answered the last such call within
  // kPollAfterAnswerWithin, this thread polls for the answer for up to
  // kBusyPoll before it sleeps: the store answers in tens of µs, and a
  // thread woken from sleep costs as much again on a virtual CPU
  // (common/busy_poll.h). That last answer's time includes this thread's
  // own wake-up when it slept, hence the wider bound to begin polling.
  // Calls that may block in the store (a get with a timeout, a watch) are
  // judged by their own last answer: a watch that waited a lease does not
  // stop a fast add from polling, nor the reverse. `prepare` is the stub's
  // PrepareAsync method.
  template <class Req, class Resp>
  grpc::Status Call(std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> (
                        pb::Store::Stub::*prepare)(grpc::ClientContext*,
                                                   const Req&,
                                                   grpc::CompletionQueue*),
                    grpc::ClientContext* ctx, const Req& req, Resp* resp,
                    bool may_block) {
    using Clock = std::chrono::steady_clock;
    grpc::CompletionQueue cq;
    auto rpc = (stub.get()->*prepare)(ctx, req, &cq);
    rpc->StartCall();
    grpc::Status status;
    rpc->Finish(resp, &status, &cq);
    void* tag;
    bool ok;
    std::atomic<int64_t>& last = last_answer_ns[may_block ? 1 : 0];
    const auto start = Clock::now();
    bool answered = false;
    if (poll_for_answers &&
        last.load(std::memory_order_relaxed) <
            absl::ToInt64Nanoseconds(kPollAfterAnswerWithin)) {
      const auto until = start + absl::ToChronoNanoseconds(kBusyPoll);
      do {
        answered = cq.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
                   grpc::CompletionQueue::GOT_EVENT;
      } while (!answered && Clock::now() < until);
    }
    if (!answered) cq.Next(&tag, &ok);
    last.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   Clock::now() - start)
                   .count(),
               std::memory_order_relaxed);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }
  // How long the last call that does not block [0], and the last that may
  // [1], waited for its answer (ns).
  std::atomic<int64_t> last_answer_ns[2] = {INT64_MAX, INT64_MAX};

  absl::Mutex channel_mu;
  absl::Mutex mu;
  std::set<grpc::ClientContext*> active ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
};

namespace {

// Registers a call so Close() can cancel it.
class Tracked {
 public:
  Tracked(absl::Mutex* mu, std::set<grpc::ClientContext*>* active, bool* closed,
          grpc::ClientContext* ctx)
      : mu_(mu), active_(active), ctx_(ctx) {
    absl::MutexLock lock(mu_);
    if (*closed) ctx_->TryCancel();
    active_->insert(ctx_);
  }
  ~Tracked() {
    absl::MutexLock lock(mu_);
    active_->erase(ctx_);
  }

 private:
  absl::Mutex* mu_;
  std::set<grpc::ClientContext*>* active_;
  grpc::ClientContext* ctx_;
};

}  // namespace

void GrpcStoreClient::Close() {
  absl::MutexLock lock(&impl_->mu);
  impl_->closed = true;
  for (auto* ctx : impl_->active) ctx->TryCancel();
}

GrpcStoreClient::GrpcStoreClient(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
GrpcStoreClient::~GrpcStoreClient() = default;

std::unique_ptr<GrpcStoreClient> GrpcStoreClient::Connect(
    const std::string& endpoint, absl::Duration rpc_timeout,
    const StoreSecurity& security, bool own_connection, bool poll_for_answers) {
  auto impl = std::make_unique<Impl>();
  impl->own_connection = own_connection;
  impl->poll_for_answers = poll_for_answers;
  impl->endpoint = endpoint;
  impl->rpc_timeout = rpc_timeout;
  impl->security = security;
  if (!security.token.empty()) {
    impl->token_header = absl::StrCat(kTokenPrefix, security.token);
  }
  // One look-up now, so a store that is up is connecting before the first
  // call; a name that does not resolve yet is looked up again by the calls.
  // Nothing here waits for the connection: Close cannot reach a wait in
  // Connect, which runs on the thread that reads the stop signals.
  // (A failure here is the calls' to report.)
  (void)impl->EnsureStub(absl::Now());
  return std::unique_ptr<GrpcStoreClient>(new GrpcStoreClient(std::move(impl)));
}

absl::Status GrpcStoreClient::WaitUntilReachable(absl::Duration timeout) {
  grpc::ClientContext ctx;
  impl_->Authorize(&ctx);
  ctx.set_wait_for_ready(true);
  const absl::Time deadline = absl::Now() + timeout;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  if (absl::Status s = impl_->EnsureStub(deadline); !s.ok()) return s;
  impl_->ConnectSoon(deadline);
  if (absl::Status s = impl_->CheckTlsPeer(deadline); !s.ok()) return s;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::NumKeysRequest req;
  pb::NumKeysResponse resp;
  return impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncNumKeys, &ctx,
                                  req, &resp, /*may_block=*/true),
                      "connect");
}

absl::StatusOr<int64_t> GrpcStoreClient::MultiSet(
    const std::vector<std::pair<std::string, std::string>>& kvs,
    absl::Duration ttl) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::SetRequest req;
  for (const auto& [k, v] : kvs) {
    auto* kv = req.add_kvs();
    kv->set_key(k);
    kv->set_value(v);
  }
  req.set_ttl_ms(absl::ToInt64Milliseconds(ttl));
  pb::SetResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncSet, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "set");
  if (!s.ok()) return s;
  return resp.revision();
}

absl::StatusOr<std::vector<std::string>> GrpcStoreClient::MultiGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, timeout); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::GetRequest req;
  for (const auto& k : keys) req.add_keys(k);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  pb::GetResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncGet, &ctx,
                                    req, &resp, timeout > absl::ZeroDuration()),
                        "get");
  if (!s.ok()) return s;
  return std::vector<std::string>(resp.values().begin(), resp.values().end());
}

absl::StatusOr<int64_t> GrpcStoreClient::Add(const std::string& key,
                                             int64_t delta) {
  auto r = AddThenRecord(key, delta, "", "");
  if (!r.ok()) return r.status();
  return r->count;
}

absl::StatusOr<AddRecordResult> GrpcStoreClient::AddThenRecord(
    const std::string& key, int64_t delta, const std::string& record_prefix,
    const std::string& record) {
  auto r = AddRequest({}, absl::ZeroDuration(), key, delta, record_prefix,
                      record, "");
  if (!r.ok()) return r.status();
  return r->add;
}

absl::StatusOr<AddRecordResult> GrpcStoreClient::LeaseThenAddRecord(
    const std::vector<std::pair<std::string, std::string>>& lease,
    absl::Duration ttl, const std::string& key, int64_t delta,
    const std::string& record_prefix, const std::string& record) {
  auto r = AddRequest(lease, ttl, key, delta, record_prefix, record, "");
  if (!r.ok()) return r.status();
  return r->add;
}

absl::StatusOr<AddRecordListing> GrpcStoreClient::AddRecordThenList(
    const std::vector<std::pair<std::string, std::string>>& lease,
    absl::Duration ttl, const std::string& key, int64_t delta,
    const std::string& record_prefix, const std::string& record,
    const std::string& list_prefix) {
  return AddRequest(lease, ttl, key, delta, record_prefix, record, list_prefix);
}

namespace {

StoreListing FromProto(const pb::ListResponse& resp) {
  StoreListing out;
  out.revision = resp.revision();
  out.more = resp.more();
  for (const auto& e : resp.entries()) {
    out.entries.push_back(StoreEntry{e.key(), e.value(), e.revision(),
                                     absl::Milliseconds(e.age_ms()),
                                     absl::Milliseconds(e.ttl_left_ms())});
  }
  return out;
}

}  // namespace

absl::StatusOr<AddRecordListing> GrpcStoreClient::AddRequest(
    const std::vector<std::pair<std::string, std::string>>& lease,
    absl::Duration ttl, const std::string& key, int64_t delta,
    const std::string& record_prefix, const std::string& record,
    const std::string& list_prefix) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::AddRequest req;
  req.set_key(key);
  req.set_delta(delta);
  req.set_record_prefix(record_prefix);
  req.set_record(record);
  for (const auto& [k, v] : lease) {
    auto* kv = req.add_lease();
    kv->set_key(k);
    kv->set_value(v);
  }
  req.set_lease_ttl_ms(absl::ToInt64Milliseconds(ttl));
  req.set_list_prefix(list_prefix);
  pb::AddResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncAdd, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "add");
  if (!s.ok()) return s;
  AddRecordListing r;
  r.add = AddRecordResult{resp.value(), resp.recorded(), resp.leased()};
  // A store that predates `lease` added without it: written after. The add
  // took effect either way, so its answer stands if that write fails.
  if (!lease.empty() && !r.add.leased) r.add.leased = MultiSet(lease, ttl).ok();
  if (list_prefix.empty()) return r;
  // Likewise a store that predates list_prefix, or refused the listing.
  r.listing = resp.has_listing()
                  ? ListRest(list_prefix, FromProto(resp.listing()))
                  : List(list_prefix);
  return r;
}

absl::StatusOr<CompareSetResult> GrpcStoreClient::CompareSet(
    const std::string& key, const std::string& expected,
    const std::string& desired) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::CompareSetRequest req;
  req.set_key(key);
  req.set_expected(expected);
  req.set_desired(desired);
  pb::CompareSetResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncCompareSet,
                                    &ctx, req, &resp, /*may_block=*/false),
                        "compare-set");
  if (!s.ok()) return s;
  return CompareSetResult{resp.value(), resp.swapped()};
}

absl::StatusOr<int64_t> GrpcStoreClient::Append(const std::string& key,
                                                const std::string& value) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::AppendRequest req;
  req.set_key(key);
  req.set_value(value);
  pb::AppendResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncAppend, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "append");
  if (!s.ok()) return s;
  return resp.size();
}

absl::StatusOr<bool> GrpcStoreClient::Check(
    const std::vector<std::string>& keys) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::CheckRequest req;
  for (const auto& k : keys) req.add_keys(k);
  pb::CheckResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncCheck, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "check");
  if (!s.ok()) return s;
  return resp.all_exist();
}

absl::StatusOr<int64_t> GrpcStoreClient::Delete(
    const std::vector<std::string>& keys) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::DeleteRequest req;
  for (const auto& k : keys) req.add_keys(k);
  pb::DeleteResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncDelete, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "delete");
  if (!s.ok()) return s;
  return resp.deleted();
}

absl::StatusOr<int64_t> GrpcStoreClient::NumKeys() {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::NumKeysRequest req;
  pb::NumKeysResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncNumKeys, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "num-keys");
  if (!s.ok()) return s;
  return resp.num_keys();
}

absl::StatusOr<StoreListing> GrpcStoreClient::ListPage(
    const std::string& prefix, const std::string& start_after, size_t limit) {
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, absl::ZeroDuration()); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::ListRequest req;
  req.set_prefix(prefix);
  req.set_start_after(start_after);
  req.set_limit(static_cast<int64_t>(limit));
  pb::ListResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncList, &ctx,
                                    req, &resp, /*may_block=*/false),
                        "list");
  if (!s.ok()) return s;
  return FromProto(resp);
}

absl::StatusOr<WatchResult> GrpcStoreClient::WatchAny(
    const std::vector<std::string>& prefixes, int64_t after_revision,
    absl::Duration timeout) {
  if (prefixes.empty()) {
    return absl::InvalidArgumentError("a watch needs at least one prefix");
  }
  grpc::ClientContext ctx;
  if (auto p = impl_->Prepare(&ctx, timeout); !p.ok()) return p;
  Tracked tracked(&impl_->mu, &impl_->active, &impl_->closed, &ctx);
  pb::WatchRequest req;
  req.set_prefix(prefixes[0]);
  for (size_t i = 1; i < prefixes.size(); ++i) {
    req.add_more_prefixes(prefixes[i]);
  }
  req.set_after_revision(after_revision);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  pb::WatchResponse resp;
  auto s = impl_->Check(impl_->Call(&pb::Store::Stub::PrepareAsyncWatch, &ctx,
                                    req, &resp, /*may_block=*/true),
                        "watch");
  if (!s.ok()) return s;
  WatchResult out;
  out.changed = resp.changed();
  out.revision = resp.revision();
  if (resp.has_change()) {
    WatchChange c;
    c.key = resp.change().key();
    c.revision = resp.change().revision();
    if (!resp.deleted()) c.value = resp.change().value();
    out.change = std::move(c);
  }
  return out;
}

}  // namespace distjob
