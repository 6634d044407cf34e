#include "rendezvous/store/server/store_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/busy_poll.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "proto/store.grpc.pb.h"
#include "rendezvous/store/server/grpc_fd_acceptor.h"
#include "rendezvous/store/store_credentials.h"

namespace distjob {
namespace {

namespace pb = ::distjob::store::v1;

absl::Duration Ms(int64_t ms) { return absl::Milliseconds(ms); }

// Whole requests are bounded by the transport; this is the gRPC-level cap.
constexpr int kMaxMessageBytes = 8 << 20;

// Channel arguments of the server; docs/rendezvous.md lists them with the
// limits.
constexpr int kMaxStreams = 8192;
constexpr int kHandshakeTimeoutMs = 10 * 1000;
constexpr int kKeepaliveMs = 30 * 1000;
constexpr int kKeepaliveTimeoutMs = 10 * 1000;
constexpr size_t kGrpcQuotaBytes = size_t{128} << 20;
constexpr size_t kCallBytes = StoreCore::kServerCallBytes;

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

// What a tag on the completion queue stands for: low bits of the call's
// address (calls are 8-byte aligned).
enum Event : uintptr_t { kArrived = 0, kFinished = 1, kDone = 2 };
constexpr uintptr_t kEventMask = 3;

class Call {
 public:
  virtual ~Call() = default;
  virtual void On(Event event, bool ok) = 0;
  void* Tag(Event event) {
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(this) | event);
  }
};

}  // namespace

// Every call is served on a completion queue by one thread that polls it
// and runs the handler inline. gRPC 1.51's callback API runs handlers on
// two "nexting" threads that hand the poller role to each other on every
// request (a futex wake and a context switch per call, most of the store's
// CPU per request: docs/bench/store-profile.md); one thread per queue
// polls, reads, answers and writes without waking another. A large job's
// store runs several queues (StoreLimits::completion_queues): each
// completion costs time in proportion to the calls in flight on its queue
// in Debian's libgrpc, and thousands of parked waits on one queue made a
// round of 16,384 nodes take minutes (docs/bench/profile-scale-16384.txt).
class StoreServer::Service {
 public:
  Service(StoreCore* core, RequestCounts* requests, StorePeerCalls* peers,
          std::string token)
      : core_(core),
        requests_(requests),
        peers_(peers),
        token_(std::move(token)) {}
  ~Service() { Stop(); }

  void Register(grpc::ServerBuilder* builder, size_t queues) {
    builder->RegisterService(&async_);
    queues = std::max<size_t>(queues, 1);
    for (size_t i = 0; i < queues; ++i) {
      queues_.push_back(builder->AddCompletionQueue());
    }
    calls_ = std::make_unique<std::atomic<int64_t>[]>(queues);
    for (size_t i = 0; i < queues; ++i) calls_[i].store(0);
  }

  std::vector<int64_t> QueueCalls() const {
    std::vector<int64_t> out;
    for (size_t i = 0; i < queues_.size(); ++i) {
      out.push_back(calls_[i].load(std::memory_order_relaxed));
    }
    return out;
  }

  // After the server started: one outstanding request per method, and the
  // thread that serves them.
  void Run(absl::Duration busy_poll) {
    for (size_t i = 0; i < queues_.size(); ++i) {
      grpc::ServerCompletionQueue* cq = queues_[i].get();
      RequestAll(cq, i);
      threads_.emplace_back([this, cq, busy_poll] {
        pthread_setname_np(pthread_self(), "store-cq");
        Serve(cq, busy_poll);
      });
    }
  }

  // Times a queue's thread slept until an event (StoreServer::Sleeps).
  int64_t Sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

  // After the server shut down: parked waits answered, the queues shut
  // down and drained (every call deleted by its last event), the threads
  // joined. Idempotent; also for a server that never ran.
  void Stop() {
    {
      absl::MutexLock lock(&queue_mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    core_->CancelAll();
    {
      absl::MutexLock lock(&queue_mu_);
      queues_shut_ = true;
      for (auto& q : queues_) q->Shutdown();
    }
    const bool ran = !threads_.empty();
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (!ran) {
      for (auto& q : queues_) {
        void* tag;
        bool ok;
        while (q->Next(&tag, &ok)) {
        }
      }
    }
  }

 private:
  template <class Req, class Resp>
  class Unary;

  // A queue's thread: each event to its call; between events, a poll of
  // the queue rather than a sleep while they come close together.
  void Serve(grpc::ServerCompletionQueue* cq, absl::Duration busy_poll) {
    BusyPoll poll(busy_poll);
    void* tag;
    bool ok;
    for (;;) {
      if (poll.ShouldPoll()) {
        const auto got =
            cq->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
        if (got == grpc::CompletionQueue::SHUTDOWN) return;
        if (got == grpc::CompletionQueue::TIMEOUT) continue;
      } else {
        if (!cq->Next(&tag, &ok)) return;
        sleeps_.fetch_add(1, std::memory_order_relaxed);
      }
      poll.GotWork();
      const auto bits = reinterpret_cast<uintptr_t>(tag);
      reinterpret_cast<Call*>(bits & ~kEventMask)
          ->On(static_cast<Event>(bits & kEventMask), ok);
      poll.Idle();
    }
  }

  using Async = pb::Store::AsyncService;
  template <class Req, class Resp>
  using RequestFn = void (Async::*)(grpc::ServerContext*, Req*,
                                    grpc::ServerAsyncResponseWriter<Resp>*,
                                    grpc::CompletionQueue*,
                                    grpc::ServerCompletionQueue*, void*);
  template <class Req, class Resp>
  using HandleFn = void (Service::*)(Unary<Req, Resp>*);

  // One call of one method, from its request to its last event. `parks`:
  // a get or watch, which may wait in the core; it asks to hear of the
  // call's end, so that a cancelled call (the client gave up or its
  // connection closed) cancels its wait, which answers at once and frees
  // it. All events of a call come to its queue's one thread; only Finish
  // may come from another (the core answering a parked wait).
  template <class Req, class Resp>
  class Unary final : public Call {
   public:
    static void Request(Service* service, grpc::ServerCompletionQueue* cq,
                        size_t queue, RequestFn<Req, Resp> request,
                        HandleFn<Req, Resp> handle, bool parks) {
      absl::MutexLock lock(&service->queue_mu_);
      if (service->queues_shut_) return;
      auto* call = new Unary(service, cq, queue, request, handle, parks);
      if (parks) call->ctx_.AsyncNotifyWhenDone(call->Tag(kDone));
      (service->async_.*request)(&call->ctx_, &call->req_, &call->writer_, cq,
                                 cq, call->Tag(kArrived));
    }

    grpc::ServerContext* ctx() { return &ctx_; }
    const Req& req() const { return req_; }
    Resp* resp() { return &resp_; }

    // The answer; exactly once per call, from any thread.
    void Finish(const absl::Status& s) {
      {
        absl::MutexLock lock(&service_->queue_mu_);
        if (!service_->queues_shut_) {
          writer_.Finish(resp_, ToGrpcStatus(s), Tag(kFinished));
          return;
        }
      }
      // The server is gone: no event will come for this answer.
      Unref();
    }

    // A parked wait's ticket (0: answered without parking), set by the
    // handler on the call's thread before any kDone event is handled.
    void Parked(uint64_t ticket) {
      ticket_ = ticket;
      if (cancelled_ && ticket != 0) service_->core_->Cancel(ticket);
    }

    // Counted per peer until the call is deleted.
    void HoldPeer(std::string peer) { peer_ = std::move(peer); }

    void On(Event event, bool ok) override {
      switch (event) {
        case kArrived:
          // Not ok: the server shut down before a call came; no other
          // event comes for this one.
          if (!ok) {
            delete this;
            return;
          }
          Request(service_, cq_, queue_, request_, handle_, parks_);
          service_->calls_[queue_].fetch_add(1, std::memory_order_relaxed);
          (service_->*handle_)(this);
          return;
        case kDone:
          if (ctx_.IsCancelled()) {
            cancelled_ = true;
            if (ticket_ != 0) service_->core_->Cancel(ticket_);
          }
          Unref();
          return;
        case kFinished:
          Unref();
          return;
      }
    }

   private:
    Unary(Service* service, grpc::ServerCompletionQueue* cq, size_t queue,
          RequestFn<Req, Resp> request, HandleFn<Req, Resp> handle, bool parks)
        : service_(service),
          cq_(cq),
          queue_(queue),
          request_(request),
          handle_(handle),
          parks_(parks),
          refs_(parks ? 2 : 1),
          writer_(&ctx_) {}
    ~Unary() override {
      if (!peer_.empty()) service_->peers_->Release(peer_);
    }
    void Unref() {
      if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    Service* const service_;
    grpc::ServerCompletionQueue* const cq_;
    const size_t queue_;  // cq_'s index in queues_
    const RequestFn<Req, Resp> request_;
    const HandleFn<Req, Resp> handle_;
    const bool parks_;
    // Events still to come: the answer's, and the call's end for a get or
    // watch.
    std::atomic<int> refs_;
    grpc::ServerContext ctx_;
    Req req_;
    Resp resp_;
    grpc::ServerAsyncResponseWriter<Resp> writer_;
    std::string peer_;
    uint64_t ticket_ = 0;
    bool cancelled_ = false;
  };

  // The handler's type names the messages; the request function (a member
  // of one of AsyncService's bases) converts to it.
  template <class T>
  struct Same {
    using type = T;
  };
  template <class Req, class Resp>
  void RequestOne(grpc::ServerCompletionQueue* cq, size_t queue,
                  typename Same<RequestFn<Req, Resp>>::type request,
                  HandleFn<Req, Resp> handle, bool parks = false) {
    Unary<Req, Resp>::Request(this, cq, queue, request, handle, parks);
  }

  void RequestAll(grpc::ServerCompletionQueue* cq, size_t q) {
    RequestOne(cq, q, &Async::RequestSet, &Service::Set);
    RequestOne(cq, q, &Async::RequestGet, &Service::Get, /*parks=*/true);
    RequestOne(cq, q, &Async::RequestAdd, &Service::Add);
    RequestOne(cq, q, &Async::RequestCompareSet, &Service::CompareSet);
    RequestOne(cq, q, &Async::RequestAppend, &Service::Append);
    RequestOne(cq, q, &Async::RequestCheck, &Service::Check);
    RequestOne(cq, q, &Async::RequestDelete, &Service::Delete);
    RequestOne(cq, q, &Async::RequestNumKeys, &Service::NumKeys);
    RequestOne(cq, q, &Async::RequestList, &Service::List);
    RequestOne(cq, q, &Async::RequestWatch, &Service::Watch, /*parks=*/true);
  }

  void Set(Unary<pb::SetRequest, pb::SetResponse>* call) {
    if (Refuse(call, kSet)) return;
    std::vector<std::pair<std::string, std::string>> kvs;
    kvs.reserve(call->req().kvs_size());
    for (const auto& kv : call->req().kvs()) {
      kvs.emplace_back(kv.key(), kv.value());
    }
    auto rev = core_->MultiSet(kvs, Ms(call->req().ttl_ms()));
    if (rev.ok()) call->resp()->set_revision(*rev);
    Done(call, kSet, rev.status());
  }

  void Get(Unary<pb::GetRequest, pb::GetResponse>* call) {
    if (Refuse(call, kGet)) return;
    const auto& req = call->req();
    if (!Admit(call, kGet, req.timeout_ms())) return;
    std::vector<std::string> keys(req.keys().begin(), req.keys().end());
    call->Parked(
        core_->MultiGet(keys, Ms(req.timeout_ms()), [this, call](auto values) {
          if (values.ok()) {
            for (auto& v : *values) call->resp()->add_values(std::move(v));
          }
          Done(call, kGet, values.status());
        }));
  }

  void Add(Unary<pb::AddRequest, pb::AddResponse>* call) {
    if (Refuse(call, kAdd)) return;
    const auto& req = call->req();
    if (req.lease_size() > 0) {
      std::vector<std::pair<std::string, std::string>> lease;
      lease.reserve(req.lease_size());
      for (const auto& kv : req.lease())
        lease.emplace_back(kv.key(), kv.value());
      if (auto s = core_->MultiSet(lease, Ms(req.lease_ttl_ms())); !s.ok()) {
        Done(call, kAdd, s.status());
        return;
      }
    }
    auto v = core_->AddThenRecord(req.key(), req.delta(), req.record_prefix(),
                                  req.record());
    if (v.ok()) {
      call->resp()->set_value(*v);
      call->resp()->set_recorded(!req.record_prefix().empty());
      call->resp()->set_leased(req.lease_size() > 0);
      if (!req.list_prefix().empty()) {
        // The add stands whatever the listing does: a refused listing
        // (its prefix) is left unset, for the client to ask again.
        auto l = core_->List(req.list_prefix(), "", 0);
        if (l.ok()) FillListing(*l, call->resp()->mutable_listing());
      }
    }
    Done(call, kAdd, v.status());
  }

  void CompareSet(Unary<pb::CompareSetRequest, pb::CompareSetResponse>* call) {
    if (Refuse(call, kCompareSet)) return;
    const auto& req = call->req();
    auto r = core_->CompareSet(req.key(), req.expected(), req.desired());
    if (r.ok()) {
      call->resp()->set_value(r->value);
      call->resp()->set_swapped(r->swapped);
    }
    Done(call, kCompareSet, r.status());
  }

  void Append(Unary<pb::AppendRequest, pb::AppendResponse>* call) {
    if (Refuse(call, kAppend)) return;
    auto r = core_->Append(call->req().key(), call->req().value());
    if (r.ok()) call->resp()->set_size(*r);
    Done(call, kAppend, r.status());
  }

  void Check(Unary<pb::CheckRequest, pb::CheckResponse>* call) {
    if (Refuse(call, kCheck)) return;
    const auto& keys = call->req().keys();
    auto r = core_->Check({keys.begin(), keys.end()});
    if (r.ok()) call->resp()->set_all_exist(*r);
    Done(call, kCheck, r.status());
  }

  void Delete(Unary<pb::DeleteRequest, pb::DeleteResponse>* call) {
    if (Refuse(call, kDelete)) return;
    const auto& keys = call->req().keys();
    auto r = core_->Delete({keys.begin(), keys.end()});
    if (r.ok()) call->resp()->set_deleted(*r);
    Done(call, kDelete, r.status());
  }

  void NumKeys(Unary<pb::NumKeysRequest, pb::NumKeysResponse>* call) {
    if (Refuse(call, kNumKeys)) return;
    call->resp()->set_num_keys(core_->NumKeys());
    Done(call, kNumKeys, absl::OkStatus());
  }

  void List(Unary<pb::ListRequest, pb::ListResponse>* call) {
    if (Refuse(call, kList)) return;
    const auto& req = call->req();
    auto l =
        core_->List(req.prefix(), req.start_after(),
                    req.limit() > 0 ? static_cast<size_t>(req.limit()) : 0);
    if (!l.ok()) return Done(call, kList, l.status());
    FillListing(*l, call->resp());
    Done(call, kList, absl::OkStatus());
  }

  static void FillListing(const StoreListing& l, pb::ListResponse* resp) {
    resp->set_revision(l.revision);
    resp->set_more(l.more);
    for (const auto& e : l.entries) {
      auto* out = resp->add_entries();
      out->set_key(e.key);
      out->set_value(e.value);
      out->set_revision(e.revision);
      out->set_age_ms(absl::ToInt64Milliseconds(e.age));
      out->set_ttl_left_ms(absl::ToInt64Milliseconds(e.ttl_left));
    }
  }

  void Watch(Unary<pb::WatchRequest, pb::WatchResponse>* call) {
    if (Refuse(call, kWatch)) return;
    const auto& req = call->req();
    if (!Admit(call, kWatch, req.timeout_ms())) return;
    std::vector<std::string> prefixes = {req.prefix()};
    prefixes.insert(prefixes.end(), req.more_prefixes().begin(),
                    req.more_prefixes().end());
    call->Parked(core_->WatchAny(prefixes, req.after_revision(),
                                 Ms(req.timeout_ms()),
                                 [this, call](absl::StatusOr<WatchResult> r) {
                                   if (r.ok()) {
                                     auto* resp = call->resp();
                                     resp->set_changed(r->changed);
                                     resp->set_revision(r->revision);
                                     if (r->change.has_value()) {
                                       auto* c = resp->mutable_change();
                                       c->set_key(r->change->key);
                                       c->set_revision(r->change->revision);
                                       if (r->change->value.has_value()) {
                                         c->set_value(*r->change->value);
                                       } else {
                                         resp->set_deleted(true);
                                       }
                                     }
                                   }
                                   Done(call, kWatch, r.status());
                                 }));
  }

  // Checked before anything else a handler does: a call without the job's
  // token reads, writes and parks nothing. True when the call was refused
  // (and answered).
  template <class C>
  bool Refuse(C* call, Method method) {
    absl::Status refused = CheckCallToken(call->ctx()->client_metadata(),
                                          token_, "this rendezvous store");
    if (refused.ok()) return false;
    Done(call, method, refused);
    return true;
  }
  void Count(Method method, const absl::Status& s) {
    const int code = static_cast<int>(s.code());
    (*requests_)[method][code >= 0 && code < kCodes ? code : 2].fetch_add(
        1, std::memory_order_relaxed);
  }
  // Whether a get or watch may go on to the core; false when its peer may
  // park no more (the call is answered). A call that does not block is
  // not counted.
  template <class C>
  bool Admit(C* call, Method method, int64_t timeout_ms) {
    if (timeout_ms <= 0) return true;
    std::string peer = PeerAddress(call->ctx()->peer());
    if (peers_->Acquire(peer)) {
      call->HoldPeer(std::move(peer));
      return true;
    }
    Done(call, method,
         absl::ResourceExhaustedError(absl::StrCat(
             "too many blocked calls from ", peer,
             ": the limit (max_waiters_per_peer) is ", peers_->max())));
    return false;
  }
  template <class C>
  void Done(C* call, Method method, const absl::Status& s) {
    Count(method, s);
    call->Finish(s);
  }

  StoreCore* core_;
  RequestCounts* requests_;
  StorePeerCalls* peers_;
  const std::string token_;
  Async async_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  // Calls that arrived on each queue (QueueCalls).
  std::unique_ptr<std::atomic<int64_t>[]> calls_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> sleeps_{0};
  // Orders new requests and answers before the queues' shutdown: gRPC
  // refuses an operation on a queue that is shut down.
  absl::Mutex queue_mu_;
  bool queues_shut_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(queue_mu_) = false;
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
  s->acceptor_ = std::make_unique<GrpcFdAcceptor>(
      builder, MakeServerCredentials(security));
  s->service_->Register(&builder, limits.completion_queues);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the rendezvous store on ", address));
  }
  s->service_->Run(limits.busy_poll);
  s->conns_->Start(s->acceptor_->Handoff());
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

std::vector<int64_t> StoreServer::QueueCalls() const {
  return service_->QueueCalls();
}

int64_t StoreServer::Sleeps() const { return service_->Sleeps(); }

void StoreServer::Shutdown() {
  if (server_ == nullptr) return;
  conns_->Stop();
  core_->CancelAll();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  service_->Stop();
  server_.reset();
}

StoreServer::~StoreServer() { Shutdown(); }

}  // namespace distjob
