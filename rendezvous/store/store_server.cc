#include "rendezvous/store/store_server.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

}  // namespace

class StoreServer::Service : public pb::Store::CallbackService {
 public:
  Service(StoreCore* core, RequestCounts* requests, std::string token)
      : core_(core), requests_(requests), token_(std::move(token)) {}

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
    auto* reactor = ctx->DefaultReactor();
    std::vector<std::string> keys(req->keys().begin(), req->keys().end());
    core_->MultiGet(keys, Ms(req->timeout_ms()),
                    [this, reactor, resp](auto values) {
                      if (values.ok()) {
                        for (auto& v : *values) resp->add_values(std::move(v));
                      }
                      Count(kGet, values.status());
                      reactor->Finish(ToGrpcStatus(values.status()));
                    });
    return reactor;
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
    StoreListing l = core_->List(req->prefix());
    resp->set_revision(l.revision);
    for (const auto& e : l.entries) {
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
    auto* reactor = ctx->DefaultReactor();
    core_->Watch(req->prefix(), req->after_revision(), Ms(req->timeout_ms()),
                 [this, reactor, resp](auto r) {
                   if (r.ok()) {
                     resp->set_changed(r->first);
                     resp->set_revision(r->second);
                   }
                   Count(kWatch, r.status());
                   reactor->Finish(ToGrpcStatus(r.status()));
                 });
    return reactor;
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
  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                 Method method, const absl::Status& s) {
    Count(method, s);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  StoreCore* core_;
  RequestCounts* requests_;
  const std::string token_;
};

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(
    const std::string& host, int port, StoreLimits limits,
    const StoreSecurity& security) {
  std::unique_ptr<StoreServer> s(new StoreServer());
  s->core_ = std::make_unique<StoreCore>(limits);
  s->requests_ = std::make_unique<RequestCounts>();
  for (auto& codes : *s->requests_) {
    for (auto& count : codes) count.store(0);
  }
  s->service_ = std::make_unique<Service>(s->core_.get(), s->requests_.get(),
                                          security.token);
  const std::string address =
      host.find(':') != std::string::npos && host.front() != '['
          ? absl::StrCat("[", host, "]:", port)
          : absl::StrCat(host, ":", port);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.AddListeningPort(address, MakeServerCredentials(security), &s->port_);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, " (in use?)"));
  }
  DJ_LOG_INFO("rendezvous store listening on {}:{}", host, s->port_);
  return s;
}

StoreStats StoreServer::Stats() {
  static constexpr const char* kMethodNames[kMethods] = {
      "Set",   "Get",    "Add",     "CompareSet", "Append",
      "Check", "Delete", "NumKeys", "List",       "Watch"};
  StoreStats stats = core_->Stats();
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
  core_->CancelAll();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
}

StoreServer::~StoreServer() { Shutdown(); }

}  // namespace distjob
