#include "rendezvous/dynamic/wait_status.h"

namespace distjob {

void WaitStatus::Set(RdzvWait wait, int64_t round, const std::string& node,
                     int size) {
  absl::MutexLock lock(&mu_);
  now_.wait = wait;
  now_.round = round;
  now_.node = node;
  now_.size = size;
}

void WaitStatus::SetUntil(absl::Time until) {
  absl::MutexLock lock(&mu_);
  now_.until = until;
}

void WaitStatus::SetStoreError(const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  now_.store_error = std::string(error.message());
}

WaitStatus::Snapshot WaitStatus::Get() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

std::string WaitStatus::StoreUnreached() const {
  absl::MutexLock lock(&mu_);
  return now_.wait == RdzvWait::kStore ? now_.store_error : "";
}

}  // namespace distjob
