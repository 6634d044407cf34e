// After a worker failure with a communication error ("connection closed by
// peer"), what the other nodes say of it. Such an error is usually the
// collateral of another node's failure, and the race of who saw a failure
// first can go either way: the failing worker's sockets close as its
// Python tears down, so its gloo peers may fail (and their node claim the
// round) before its own node has seen it exit. The node that claimed the
// round therefore waits, before taking its failure for its own, for a peer
// to be lost (the failure was a consequence) or for another node to offer
// a failure that is not a communication error (the failure's root cause).
// A communication error another node offers is kept beside this node's
// own: a deterministic error on one node can be a communication error
// there too (NCCL's "communicator was aborted"), and the repeat check must
// not depend on which node won the claim.
#ifndef DISTJOB_AGENT_PEER_FAILURE_H_
#define DISTJOB_AGENT_PEER_FAILURE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/failure_report.h"
#include "rendezvous/rendezvous.h"

namespace distjob {

// `failure` as another node reads it (OfferFailure): one line of JSON,
// its texts cut to a few KiB.
std::string EncodeOfferedFailure(const FailureReport& failure);

// The failure another node offered; InvalidArgument when `text` is not one
// (a peer may be hostile: every field is checked, none is trusted to fit).
absl::StatusOr<FailureReport> DecodeOfferedFailure(absl::string_view text);

struct PeerVerdict {
  enum class Kind {
    kOwn,         // nothing changed within the window: the failure is ours
    kPeerLost,    // a peer was lost: the failure was its consequence
    kPeerFailed,  // another node offered its failure: the root cause
    kStopped,     // a stop signal ended the wait
  };
  Kind kind = Kind::kOwn;
  FailureReport peer_failure;  // kPeerFailed
  // kOwn: the communication error another node offered, if one did.
  std::optional<FailureReport> collateral;
};

// Waits, at most rendezvous.PeerLossWindow(), for the verdict on `own`, a
// communication error on this node (which claimed the round). `sleep`
// sleeps, and answers false when a stop signal cut it short. Logs the wait
// and its progress.
PeerVerdict AwaitPeerVerdict(ElasticRendezvous& rendezvous,
                             const FailureReport& own,
                             const std::function<bool(absl::Duration)>& sleep);

// What a decision records as the job's root cause (SwapRootCause): the
// signatures of `failure` and of the communication error offered beside
// it, one per line (a signature is one line); "" when neither has one.
std::string RootCauseRecord(const FailureReport& failure,
                            const std::optional<FailureReport>& collateral);

// Which of a decision's failures repeats `previous`, the record of the
// decision before it: `failure` first, then `collateral`; nullptr when
// neither (a failure without a signature never repeats).
const FailureReport* RepeatOf(absl::string_view previous,
                              const FailureReport& failure,
                              const std::optional<FailureReport>& collateral);

}  // namespace distjob

#endif  // DISTJOB_AGENT_PEER_FAILURE_H_
