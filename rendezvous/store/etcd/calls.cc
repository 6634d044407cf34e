#include "rendezvous/store/etcd/calls.h"

#include <grpcpp/client_context.h>

namespace distjob::etcd {

bool InFlightCalls::Register(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  if (cancelled_ && std::this_thread::get_id() != closer_) return false;
  calls_.insert(ctx);
  return true;
}

void InFlightCalls::Unregister(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  calls_.erase(ctx);
}

void InFlightCalls::CancelAll() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  closer_ = std::this_thread::get_id();
  for (auto* ctx : calls_) ctx->TryCancel();
}

bool InFlightCalls::Refused() {
  absl::MutexLock lock(&mu_);
  return cancelled_ && std::this_thread::get_id() != closer_;
}

void InFlightCalls::EndClose() {
  absl::MutexLock lock(&mu_);
  closer_ = std::thread::id();
}

}  // namespace distjob::etcd
