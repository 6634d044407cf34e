#include "rendezvous/store/store_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <atomic>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "proto/store.grpc.pb.h"
#include "rendezvous/store/store_credentials.h"

namespace distjob {
namespace {

namespace pb = ::distjob::store::v1;

absl::Duration Ms(int64_t ms) { return absl::Milliseconds(ms); }

// Whole requests are bounded by the transport; this is the gRPC-level cap.
constexpr int kMaxMessageBytes = 8 << 20;

// Channel arguments of the server; the README's limits table lists them.
constexpr int kMaxStreams = 8192;
constexpr int kHandshakeTimeoutMs = 10 * 1000;
constexpr int kKeepaliveMs = 30 * 1000;
constexpr int kKeepaliveTimeoutMs = 10 * 1000;
constexpr size_t kGrpcQuotaBytes = size_t{128} << 20;
// What a parked call costs gRPC (its call arena, the request and response,
// the reactor), counted with its wait: an upper estimate, so that the
// waits' memory limit holds for gRPC's share too.
constexpr size_t kCallBytes = 8192;

// The peer's address without its port ("ipv4:10.0.0.5:41234" ->
// "ipv4:10.0.0.5"): what the per-peer cap counts by.
std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos || colon == 0 ? peer
                                                  : peer.substr(0, colon);
}

}  // namespace

// Parked gets and watches per peer address. A peer is refused before it
// parks more; the count drops as each call ends, however it ends.
class StorePeerCalls {
 public:
  explicit StorePeerCalls(size_t max) : max_(max) {}
  bool Acquire(const std::string& peer) {
    absl::MutexLock lock(&mu_);
    size_t& n = calls_[peer];
    if (n >= max_) return false;
    ++n;
    return true;
  }
  void Release(const std::string& peer) {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(peer);
    if (it != calls_.end() && --it->second == 0) calls_.erase(it);
  }
  size_t max() const { return max_; }

 private:
  const size_t max_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, size_t> calls_ ABSL_GUARDED_BY(mu_);
};

namespace {

// The reactor of a get or watch that may park in the core. The core runs
// its callback exactly once (answer, deadline, Cancel or shutdown), and
// that callback is the one Finish. A cancelled call (the client gave up or
// its connection closed) cancels the parked wait, which answers at once
// and frees it. Two owners end its life: the handler that parks it, and
// gRPC's OnDone; the callback may finish the call before the handler
// learned the ticket.
class ParkedCall : public grpc::ServerUnaryReactor {
 public:
  ParkedCall(StoreCore* core, StorePeerCalls* peers, std::string peer)
      : core_(core), peers_(peers), peer_(std::move(peer)) {}

  void Answer(const absl::Status& s) { Finish(ToGrpcStatus(s)); }

  // Called by the handler once the core returned `ticket` (0: not
  // parked); the handler does not touch the call after this.
  void Parked(uint64_t ticket) {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      ticket_ = ticket;
      cancelled = cancelled_;
    }
    if (cancelled && ticket != 0) core_->Cancel(ticket);
    Unref();
  }

  void OnCancel() override {
    uint64_t ticket;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      ticket = ticket_;
    }
    if (ticket != 0) core_->Cancel(ticket);
  }

  void OnDone() override { Unref(); }

 private:
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (peers_ != nullptr) peers_->Release(peer_);
    delete this;
  }

  StoreCore* const core_;
  StorePeerCalls* const peers_;  // null: not counted
  const std::string peer_;
  std::atomic<int> refs_{2};  // the handler's and OnDone's
  absl::Mutex mu_;
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

class StoreServer::Service : public pb::Store::CallbackService {
 public:
  Service(StoreCore* core, RequestCounts* requests, StorePeerCalls* peers,
          std::string token)
      : core_(core),
        requests_(requests),
        peers_(peers),
        token_(std::move(token)) {}

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx,
                                const pb::SetRequest* req,
                                pb::SetResponse* resp) override {
    if (auto* denied = Refuse(ctx, kSet)) return denied;
    std::vector<std::pair<std::string, std::string>> kvs;
    for (const auto& kv : req->kvs()) kvs.emplace_back(kv.key(), kv.value());
    auto rev = core_->MultiSet(kvs, Ms(req->ttl_ms()));
    if (rev.ok()) resp->set_revision(*rev);
    return Done(ctx, kSet, rev.status());
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx,
                                const pb::GetRequest* req,
                                pb::GetResponse* resp) override {
    if (auto* denied = Refuse(ctx, kGet)) return denied;
    ParkedCall* call = Admit(ctx, req->timeout_ms());
    if (call == nullptr) return Refused(ctx, kGet);
    std::vector<std::string> keys(req->keys().begin(), req->keys().end());
    call->Parked(core_->MultiGet(keys, Ms(req->timeout_ms()),
                                 [this, call, resp](auto values) {
                                   if (values.ok()) {
                                     for (auto& v : *values)
                                       resp->add_values(std::move(v));
                                   }
                                   Count(kGet, values.status());
                                   call->Answer(values.status());
                                 }));
    return call;
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* ctx,
                                const pb::AddRequest* req,
                                pb::AddResponse* resp) override {
    if (auto* denied = Refuse(ctx, kAdd)) return denied;
    auto v = core_->Add(req->key(), req->delta());
    if (v.ok()) resp->set_value(*v);
    return Done(ctx, kAdd, v.status());
  }

  grpc::ServerUnaryReactor* CompareSet(grpc::CallbackServerContext* ctx,
                                       const pb::CompareSetRequest* req,
                                       pb::CompareSetResponse* resp) override {
    if (auto* denied = Refuse(ctx, kCompareSet)) return denied;
    auto r = core_->CompareSet(req->key(), req->expected(), req->desired());
    if (r.ok()) {
      resp->set_value(r->value);
      resp->set_swapped(r->swapped);
    }
    return Done(ctx, kCompareSet, r.status());
  }

  grpc::ServerUnaryReactor* Append(grpc::CallbackServerContext* ctx,
                                   const pb::AppendRequest* req,
                                   pb::AppendResponse* resp) override {
    if (auto* denied = Refuse(ctx, kAppend)) return denied;
    auto r = core_->Append(req->key(), req->value());
    if (r.ok()) resp->set_size(*r);
    return Done(ctx, kAppend, r.status());
  }

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const pb::CheckRequest* req,
                                  pb::CheckResponse* resp) override {
    if (auto* denied = Refuse(ctx, kCheck)) return denied;
    auto r = core_->Check({req->keys().begin(), req->keys().end()});
    if (r.ok()) resp->set_all_exist(*r);
    return Done(ctx, kCheck, r.status());
  }

  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* ctx,
                                   const pb::DeleteRequest* req,
                                   pb::DeleteResponse* resp) override {
    if (auto* denied = Refuse(ctx, kDelete)) return denied;
    auto r = core_->Delete({req->keys().begin(), req->keys().end()});
    if (r.ok()) resp->set_deleted(*r);
    return Done(ctx, kDelete, r.status());
  }

  grpc::ServerUnaryReactor* NumKeys(grpc::CallbackServerContext* ctx,
                                    const pb::NumKeysRequest*,
                                    pb::NumKeysResponse* resp) override {
    if (auto* denied = Refuse(ctx, kNumKeys)) return denied;
    resp->set_num_keys(core_->NumKeys());
    return Done(ctx, kNumKeys, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx,
                                 const pb::ListRequest* req,
                                 pb::ListResponse* resp) override {
    if (auto* denied = Refuse(ctx, kList)) return denied;
    auto l =
        core_->List(req->prefix(), req->start_after(),
                    req->limit() > 0 ? static_cast<size_t>(req->limit()) : 0);
    if (!l.ok()) return Done(ctx, kList, l.status());
    resp->set_revision(l->revision);
    resp->set_more(l->more);
    for (const auto& e : l->entries) {
      auto* out = resp->add_entries();
      out->set_key(e.key);
      out->set_value(e.value);
      out->set_revision(e.revision);
      out->set_age_ms(absl::ToInt64Milliseconds(e.age));
      out->set_ttl_left_ms(absl::ToInt64Milliseconds(e.ttl_left));
    }
    return Done(ctx, kList, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* Watch(grpc::CallbackServerContext* ctx,
                                  const pb::WatchRequest* req,
                                  pb::WatchResponse* resp) override {
    if (auto* denied = Refuse(ctx, kWatch)) return denied;
    ParkedCall* call = Admit(ctx, req->timeout_ms());
    if (call == nullptr) return Refused(ctx, kWatch);
    call->Parked(core_->Watch(req->prefix(), req->after_revision(),
                              Ms(req->timeout_ms()),
                              [this, call, resp](auto r) {
                                if (r.ok()) {
                                  resp->set_changed(r->first);
                                  resp->set_revision(r->second);
                                }
                                Count(kWatch, r.status());
                                call->Answer(r.status());
                              }));
    return call;
  }

 private:
  // Checked before anything else a handler does: a call without the job's
  // token reads, writes and parks nothing. nullptr when the call may go on.
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx,
                                   Method method) {
    if (token_.empty()) return nullptr;
    const auto& metadata = ctx->client_metadata();
    const auto it = metadata.find(kTokenMetadataKey);
    absl::Status refused;
    if (it == metadata.end()) {
      refused = absl::UnauthenticatedError(
          "this rendezvous store requires the job's token");
    } else if (!TokenMatches(
                   absl::string_view(it->second.data(), it->second.size()),
                   token_)) {
      refused =
          absl::UnauthenticatedError("this rendezvous store refused the token");
    } else {
      return nullptr;
    }
    return Done(ctx, method, refused);
  }
  void Count(Method method, const absl::Status& s) {
    const int code = static_cast<int>(s.code());
    (*requests_)[method][code >= 0 && code < kCodes ? code : 2].fetch_add(
        1, std::memory_order_relaxed);
  }
  // The reactor of a get or watch; null when the peer may park no more. A
  // call that does not block is not counted.
  ParkedCall* Admit(grpc::CallbackServerContext* ctx, int64_t timeout_ms) {
    if (timeout_ms <= 0) return new ParkedCall(core_, nullptr, "");
    std::string peer = PeerAddress(ctx->peer());
    if (!peers_->Acquire(peer)) return nullptr;
    return new ParkedCall(core_, peers_, std::move(peer));
  }
  grpc::ServerUnaryReactor* Refused(grpc::CallbackServerContext* ctx,
                                    Method method) {
    return Done(ctx, method,
                absl::ResourceExhaustedError(absl::StrCat(
                    "too many blocked calls from ", PeerAddress(ctx->peer()),
                    ": the limit (max_waiters_per_peer) is ", peers_->max())));
  }
  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                 Method method, const absl::Status& s) {
    Count(method, s);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  StoreCore* core_;
  RequestCounts* requests_;
  StorePeerCalls* peers_;
  const std::string token_;
};

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(
    const std::string& host, int port, StoreLimits limits,
    const StoreSecurity& security, ConnLimits conns) {
  std::unique_ptr<StoreServer> s(new StoreServer());
  // A parked call's gRPC state counts with its wait.
  if (limits.call_bytes == 0) limits.call_bytes = kCallBytes;
  s->core_ = std::make_unique<StoreCore>(limits);
  s->requests_ = std::make_unique<RequestCounts>();
  for (auto& codes : *s->requests_) {
    for (auto& count : codes) count.store(0);
  }
  s->peers_ = std::make_unique<StorePeerCalls>(limits.max_waiters_per_peer);
  s->service_ = std::make_unique<Service>(s->core_.get(), s->requests_.get(),
                                          s->peers_.get(), security.token);
  const std::string address =
      host.find(':') != std::string::npos && host.front() != '['
          ? absl::StrCat("[", host, "]:", port)
          : absl::StrCat(host, ":", port);
  // Ours, not gRPC's listener: it caps connections (conn_limiter.h).
  auto limiter = ConnLimiter::Listen(host, port, conns, security.tls());
  if (!limiter.ok()) return limiter.status();
  s->conns_ = std::move(*limiter);
  s->port_ = s->conns_->port();
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // Connections: capped by conns_; these end the ones that hold nothing.
  // A connection with no call for conns.idle_timeout is closed (a real client
  // reconnects on its next call), one that has not completed its HTTP/2
  // handshake in kHandshakeTimeoutMs likewise, a silent peer is dropped
  // after a missed keepalive, and one connection carries at most
  // kMaxStreams calls at once.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreams);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(conns.idle_timeout)));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             kHandshakeTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             kKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC's own buffers (connections, frames, messages in flight) draw on
  // this quota; past it gRPC shrinks its windows and drops new
  // connections' reads instead of growing.
  grpc::ResourceQuota quota("distjob-store");
  quota.Resize(kGrpcQuotaBytes);
  builder.SetResourceQuota(quota);
  s->acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      MakeServerCredentials(security));
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the rendezvous store on ", address));
  }
  s->conns_->Start([acceptor = s->acceptor_.get()](int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.fd = fd;
    acceptor->HandleNewConnection(&p);
  });
  DJ_LOG_INFO("rendezvous store listening on {}:{}", host, s->port_);
  return s;
}

StoreStats StoreServer::Stats() {
  static constexpr const char* kMethodNames[kMethods] = {
      "Set",   "Get",    "Add",     "CompareSet", "Append",
      "Check", "Delete", "NumKeys", "List",       "Watch"};
  StoreStats stats = core_->Stats();
  const ConnStats conns = conns_->Stats();
  stats.connections = conns.open;
  stats.connections_refused = conns.refused;
  stats.connections_evicted = conns.evicted;
  stats.connections_mismatched = conns.protocol_mismatch;
  for (int m = 0; m < kMethods; ++m) {
    for (int c = 0; c < kCodes; ++c) {
      const int64_t n = (*requests_)[m][c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      stats.requests.push_back(
          {kMethodNames[m],
           absl::StatusCodeToString(static_cast<absl::StatusCode>(c)), n});
    }
  }
  return stats;
}

void StoreServer::Shutdown() {
  if (server_ == nullptr) return;
  conns_->Stop();
  core_->CancelAll();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
}

StoreServer::~StoreServer() { Shutdown(); }

}  // namespace distjob
