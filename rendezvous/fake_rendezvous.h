// Scripted rendezvous for the agent loop's tests: Next returns the rounds
// the test lined up; the elastic one also answers failure claims from the
// script and lets the test fire a membership change.
#ifndef DISTJOB_RENDEZVOUS_FAKE_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_FAKE_RENDEZVOUS_H_

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/rendezvous.h"

namespace distjob {

// What a test scripts and reads back. It outlives the fakes, which the
// agent loop owns and destroys before returning.
struct FakeRendezvousScript {
  // Next's answers in order. Past the end Next fails (FailedPrecondition),
  // so a loop that asks for more rounds than scripted ends visibly.
  std::deque<absl::StatusOr<RendezvousResult>> rounds;
  // ClaimFailure's answers in order (elastic only). Past the end it
  // answers false and counts an overrun, for the test to check.
  std::deque<bool> claims;

  // Fires the membership change the loop registered for (elastic only):
  // MembershipChanged() is then true until the next Next.
  void FireMembershipChange();

  // PeerLossWindow's answer.
  absl::Duration peer_loss_window = absl::ZeroDuration();
  // The job's latest root cause (SwapRootCause), as the store keeps it.
  std::string root_cause;
  // The round's offered failures (OfferFailure), as the store keeps
  // them; a test sets one to play another node's offer.
  std::optional<std::string> offered_failure;              // kRootCause
  std::optional<std::string> offered_communication_error;  // kCommunication
  int offers = 0;                                          // OfferFailure calls

  // Recorded.
  int next_calls = 0;
  int claim_calls = 0;
  int claim_overruns = 0;
  std::vector<int> noted_restarts;
  std::vector<std::string> end_reasons;
  std::optional<bool> shutdown;  // Shutdown's argument, once called
  bool changed = false;
  std::function<void()> on_change;
};

// Round `round` of a two-node job, this node rank 0, `restart_count`
// restarts so far.
RendezvousResult FakeRound(int64_t round, int restart_count = 0);

// Only the base interface: a fixed round, as standalone or static.
class FakeRendezvous : public Rendezvous {
 public:
  explicit FakeRendezvous(FakeRendezvousScript* script) : script_(script) {}

  absl::StatusOr<RendezvousResult> Next(int local_world_size) override;
  void Shutdown(bool succeeded) override { script_->shutdown = succeeded; }
  void SetEndReason(const std::string& reason) override {
    script_->end_reasons.push_back(reason);
  }

 private:
  FakeRendezvousScript* const script_;
};

class FakeElasticRendezvous : public ElasticRendezvous {
 public:
  explicit FakeElasticRendezvous(FakeRendezvousScript* script)
      : base_(script), script_(script) {}

  absl::StatusOr<RendezvousResult> Next(int local_world_size) override;
  void Shutdown(bool succeeded) override { base_.Shutdown(succeeded); }
  void SetEndReason(const std::string& reason) override {
    base_.SetEndReason(reason);
  }
  void NoteFailureRestart(int restart_count) override {
    script_->noted_restarts.push_back(restart_count);
  }
  void SetOnMembershipChange(std::function<void()> callback) override {
    script_->on_change = std::move(callback);
  }
  bool MembershipChanged() const override { return script_->changed; }
  bool ClaimFailure() override;
  absl::Duration PeerLossWindow() const override {
    return script_->peer_loss_window;
  }
  std::string SwapRootCause(const std::string& record) override {
    std::string previous = script_->root_cause;
    script_->root_cause = record;
    return previous;
  }
  void OfferFailure(OfferedFailureKind kind,
                    const std::string& failure) override {
    ++script_->offers;
    std::optional<std::string>& offered = Offered(kind);
    if (!offered.has_value()) offered = failure;
  }
  std::optional<std::string> OfferedFailure(OfferedFailureKind kind) override {
    return Offered(kind);
  }

 private:
  std::optional<std::string>& Offered(OfferedFailureKind kind) {
    return kind == OfferedFailureKind::kRootCause
               ? script_->offered_failure
               : script_->offered_communication_error;
  }

  FakeRendezvous base_;
  FakeRendezvousScript* const script_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_FAKE_RENDEZVOUS_H_
