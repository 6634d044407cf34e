// DynamicRendezvous after a worker failure: which node decides (the
// claim), how long a lost peer takes to be seen, and the root causes the
// nodes share through the store (rendezvous.h's ElasticRendezvous).
#include <algorithm>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "rendezvous/dynamic_rendezvous.h"

namespace distjob {

void DynamicRendezvous::NoteFailureRestart(int restart_count) {
  pending_restarts_ = std::max(pending_restarts_, restart_count);
}

bool DynamicRendezvous::ClaimFailure() {
  // The host left with the store: nobody else is left to decide.
  if (host_left_) return true;
  const int64_t round = CurrentRound();
  // The store orders the claims: no clocks of different nodes compared.
  auto claim = store_->CompareSet(keys_.Failed(round), "", options_.node);
  if (!claim.ok()) return true;  // no store to ask: the failure is ours
  if (claim->value == options_.node) return true;
  DJ_LOG_INFO("node {}'s worker failed first in round {}", claim->value, round);
  decider_ = claim->value;
  decider_round_ = round;
  return false;
}

absl::Duration DynamicRendezvous::PeerLossWindow() const {
  // The lease, then the watch of the next member's lease and its new round:
  // one keep-alive interval is ample for that.
  return lease_ + options_.config.keep_alive_interval;
}

std::string DynamicRendezvous::SwapRootCause(const std::string& signature) {
  // One decider a round writes it, so a read then a write is enough.
  auto previous = store_->Get(keys_.RootCause(), absl::ZeroDuration());
  if (absl::Status s = store_->Set(keys_.RootCause(), signature).status();
      !s.ok()) {
    DJ_LOG_DEBUG("cannot record the root cause: {}", s.message());
  }
  return previous.ok() ? *previous : "";
}

int64_t DynamicRendezvous::CurrentRound() {
  absl::MutexLock lock(&mu_);
  return current_.round;
}

void DynamicRendezvous::OfferRootFailure(const std::string& failure) {
  // The first offer wins: the store orders them.
  auto offered =
      store_->CompareSet(keys_.OfferedFailure(CurrentRound()), "", failure);
  if (!offered.ok()) {
    DJ_LOG_DEBUG("cannot offer the failure as the root cause: {}",
                 offered.status().message());
  }
}

std::optional<std::string> DynamicRendezvous::OfferedRootFailure() {
  auto offered =
      store_->Get(keys_.OfferedFailure(CurrentRound()), absl::ZeroDuration());
  if (!offered.ok() || offered->empty()) return std::nullopt;
  return *std::move(offered);
}

}  // namespace distjob
