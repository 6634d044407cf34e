// What a DynamicRendezvous node does after a worker failure: which node
// decides whether the job restarts or ends (the claim, ordered by the
// store, so no clocks of different nodes are compared), the restarts to
// carry into the next round, and the root causes the nodes share through
// the store (rendezvous.h's ElasticRendezvous). Unlocked, as when it was
// the facade's own state: the agent loop claims between its calls of
// Next, which reads the decider and the restarts.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_FAILURE_CLAIM_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_FAILURE_CLAIM_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class FailureClaim {
 public:
  // What it uses of the facade; every pointer outlives the claim.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    std::string node;  // this node
    // The store's host left with the store (set by the round monitor).
    const std::atomic<bool>* host_left = nullptr;
  };

  explicit FailureClaim(Deps deps);
  FailureClaim(const FailureClaim&) = delete;
  FailureClaim& operator=(const FailureClaim&) = delete;

  // Whether this node decides after its worker failed in `round`: its
  // claim won, or there is no store (or no one else) to ask. Lost, the
  // winner is remembered (decider, decider_round).
  bool Claim(int64_t round);
  // The restarts the next round carries: the most noted.
  void NoteRestart(int restart_count);
  int pending_restarts() const { return pending_restarts_; }
  // The node whose claim won round decider_round (-1: none): it decides
  // whether the job restarts or ends; forgotten once it is seen gone.
  const std::string& decider() const { return decider_; }
  int64_t decider_round() const { return decider_round_; }
  void ForgetDecider() { decider_round_ = -1; }

  // rendezvous.h's ElasticRendezvous, for round `round` where it asks.
  std::string SwapRootCause(const std::string& record);
  void OfferFailure(int64_t round, OfferedFailureKind kind,
                    const std::string& failure);
  std::optional<std::string> OfferedFailure(int64_t round,
                                            OfferedFailureKind kind);

 private:
  std::string OfferKey(int64_t round, OfferedFailureKind kind) const;

  const Deps d_;
  int pending_restarts_ = 0;
  std::string decider_;
  int64_t decider_round_ = -1;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_FAILURE_CLAIM_H_
