#include "rendezvous/store/etcd/etcd_fixture.h"

#include <utility>

#include "common/net.h"

namespace distjob {
namespace {

class FaultInterceptor : public grpc::experimental::Interceptor {
 public:
  FaultInterceptor(Faults* faults, std::string method)
      : faults_(faults), method_(std::move(method)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using Hook = grpc::experimental::InterceptionHookPoints;
    if (m->QueryInterceptionHookPoint(Hook::PRE_SEND_MESSAGE) &&
        method_ == "/etcdserverpb.KV/Txn") {
      const auto* req =
          static_cast<const etcdserverpb::TxnRequest*>(m->GetSendMessage());
      bool writes_counter = false;
      for (const auto& op : req->success()) {
        writes_counter =
            writes_counter ||
            (op.has_request_put() &&
             op.request_put().key().find("/ctr/") != std::string::npos);
      }
      absl::MutexLock lock(&faults_->mu);
      if (writes_counter && faults_->lose > 0) {
        --faults_->lose;
        ++faults_->lost;
        faults_->lost_txns.push_back(*req);
        fail_ = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                             "injected: answer lost after the commit");
      }
    }
    if (m->QueryInterceptionHookPoint(Hook::PRE_SEND_INITIAL_METADATA) &&
        method_ == "/etcdserverpb.Lease/LeaseGrant") {
      absl::MutexLock lock(&faults_->mu);
      if (faults_->hold_grants) {
        ++faults_->held;
        faults_->mu.Await(absl::Condition(&faults_->released));
        fail_ = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                             "injected: grant refused");
      }
    }
    if (method_ == "/etcdserverpb.Lease/LeaseKeepAlive") HoldKeepAlive(m);
    if (m->QueryInterceptionHookPoint(Hook::POST_RECV_STATUS) && !fail_.ok()) {
      *m->GetRecvStatus() = fail_;
    }
    m->Proceed();
  }

 private:
  static bool AnswerMayPass(Faults* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu) {
    return f->hold_lease == 0 || f->permits > 0;
  }
  void HoldKeepAlive(grpc::experimental::InterceptorBatchMethods* m) {
    using Hook = grpc::experimental::InterceptionHookPoints;
    absl::MutexLock lock(&faults_->mu);
    if (faults_->hold_lease == 0) return;
    if (m->QueryInterceptionHookPoint(Hook::PRE_SEND_MESSAGE)) {
      const auto* req = static_cast<const etcdserverpb::LeaseKeepAliveRequest*>(
          m->GetSendMessage());
      if (req->id() == faults_->hold_lease) ++faults_->renewals_sent;
    }
    if (m->QueryInterceptionHookPoint(Hook::POST_RECV_MESSAGE)) {
      const auto* resp =
          static_cast<const etcdserverpb::LeaseKeepAliveResponse*>(
              m->GetRecvMessage());
      if (resp == nullptr || resp->id() != faults_->hold_lease) return;
      ++faults_->answers_arrived;
      faults_->mu.Await(absl::Condition(&AnswerMayPass, faults_));
      if (faults_->hold_lease != 0) --faults_->permits;
    }
  }

  Faults* const faults_;
  const std::string method_;
  grpc::Status fail_;
};

class FaultFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit FaultFactory(Faults* faults) : faults_(faults) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new FaultInterceptor(faults_, info->method());
  }

 private:
  Faults* const faults_;
};

}  // namespace

// A free loopback port: the project's own helper, asserted here.
int FreePort() {
  auto port = FindFreePort("127.0.0.1");
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : 0;
}

// Whether `cond` holds within `within` (polled every 5 ms).
bool WaitFor(const std::function<bool()>& cond, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return cond();
}

etcd::Hooks FaultHooks(Faults* faults) {
  etcd::Hooks hooks;
  hooks.interceptors = [faults] {
    std::vector<
        std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
        v;
    v.push_back(std::make_unique<FaultFactory>(faults));
    return v;
  };
  hooks.lease_wait = [faults] {
    absl::MutexLock lock(&faults->mu);
    ++faults->lease_waits;
  };
  return hooks;
}

}  // namespace distjob
