#include "rendezvous/dynamic/failure_claim.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"
#include "common/logging.h"

namespace distjob {

FailureClaim::FailureClaim(Deps deps) : d_(std::move(deps)) {}

void FailureClaim::NoteRestart(int restart_count) {
  pending_restarts_ = std::max(pending_restarts_, restart_count);
}

bool FailureClaim::Claim(int64_t round) {
  // The host left with the store: nobody else is left to decide.
  if (*d_.host_left) return true;
  // The store orders the claims: no clocks of different nodes compared.
  auto claim = d_.store->CompareSet(d_.keys->Failed(round), "", d_.node);
  if (!claim.ok()) return true;  // no store to ask: the failure is ours
  if (claim->value == d_.node) return true;
  DJ_LOG_INFO("node {}'s worker failed first in round {}", claim->value, round);
  decider_ = claim->value;
  decider_round_ = round;
  return false;
}

std::string FailureClaim::SwapRootCause(const std::string& record) {
  // One decider a round writes it, so a read then a write is enough.
  auto previous = d_.store->Get(d_.keys->RootCause(), absl::ZeroDuration());
  if (absl::Status s = d_.store->Set(d_.keys->RootCause(), record).status();
      !s.ok()) {
    DJ_LOG_DEBUG("cannot record the root cause: {}", s.message());
  }
  return previous.ok() ? *previous : "";
}

std::string FailureClaim::OfferKey(int64_t round,
                                   OfferedFailureKind kind) const {
  return kind == OfferedFailureKind::kRootCause
             ? d_.keys->OfferedFailure(round)
             : d_.keys->OfferedCommunicationError(round);
}

void FailureClaim::OfferFailure(int64_t round, OfferedFailureKind kind,
                                const std::string& failure) {
  // The first offer wins: the store orders them.
  auto offered = d_.store->CompareSet(OfferKey(round, kind), "", failure);
  if (!offered.ok()) {
    DJ_LOG_DEBUG("cannot offer the failure to the round's decider: {}",
                 offered.status().message());
  }
}

std::optional<std::string> FailureClaim::OfferedFailure(
    int64_t round, OfferedFailureKind kind) {
  auto offered = d_.store->Get(OfferKey(round, kind), absl::ZeroDuration());
  if (!offered.ok() || offered->empty()) return std::nullopt;
  return *std::move(offered);
}

}  // namespace distjob
