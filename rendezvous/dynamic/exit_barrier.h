// How a DynamicRendezvous node leaves the job (its Shutdown): the exit
// barrier after success, the job's end told to the others and waited for
// until they read it, and the store's host announcing that it leaves.
// A class of its own, with what it needs of the facade handed in (the
// store and its keys, this node, the times, two flags the facade and its
// monitor share), so that leaving reads apart from forming a round.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_EXIT_BARRIER_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_EXIT_BARRIER_H_

#include <atomic>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rendezvous/dynamic/wait_status.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class ExitBarrier {
 public:
  // What it uses of the facade; every pointer outlives the barrier.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    std::string node;      // this node
    bool hosting = false;  // this node's agent hosts the store
    absl::Duration exit_barrier_timeout;
    absl::Duration keep_alive_interval;
    absl::Duration lease;
    // What the node waits for, for the progress lines.
    WaitStatus* wait_status = nullptr;
    // Set here once the store stops answering, so that the goodbyes that
    // follow are brief; the facade and its monitor set it too.
    std::atomic<bool>* store_lost = nullptr;
    // Set by the facade's Cancel (a stop signal).
    const std::atomic<bool>* cancelled = nullptr;
  };

  explicit ExitBarrier(Deps deps);
  ExitBarrier(const ExitBarrier&) = delete;
  ExitBarrier& operator=(const ExitBarrier&) = delete;

  // Tells the store this node has read why the job ended (once; a lost
  // write is written again by the next call).
  void AcknowledgeEnd();
  // After this node's workers succeeded: the exit barrier of `round`,
  // then the host waits for the others to read its outcome (at most 5 s),
  // or announces it leaves before they finished; a member counts its
  // goodbye.
  void LeaveSucceeded(const RdzvState& round);
  // Ends the job for every node (`why`, at ctl/aborted); the store's host
  // then keeps the store up until every other live member of `round` read
  // it, at most one lease.
  void EndJob(const RdzvState& round, const std::string& why);
  // The members of `round` that did not pass its exit barrier yet, named
  // (at most a few), for the progress lines.
  std::string Unfinished(const RdzvState& round);

  // A write the other nodes would have read, lost: the peers wait longer
  // (a lease or a deadline) for what it said, so the log says why.
  static void WarnIfLost(absl::string_view what, const absl::Status& s);

 private:
  // Waits until every live member of `round` finished, at most
  // exit_barrier_timeout. False when it ended without that: the timeout
  // passed, the store went away or the wait was cancelled.
  bool Await(const RdzvState& round);
  // The store's host ending the job keeps the store up until every other
  // live member of `round` acknowledged the end, at most one lease.
  void AwaitEndSeen(const RdzvState& round);
  // The store's host leaving before every member finished (its exit
  // barrier timed out): says so under ctl/, so that the members still
  // running finish without the store rather than taking its loss for a
  // failure, and waits (at most one lease) until each has read it.
  void AnnounceHostLeaving(const RdzvState& round);
  // Whether every other member of `round` has a mark (a key under
  // `marks_prefix` whose node `marked_node` parses) or holds no lease;
  // `members` caches the round's list across calls.
  // `also_marked`: nodes that count as marked whatever the listing says.
  bool AllMarkedOrGone(
      const RdzvState& round, const std::string& marks_prefix,
      const std::function<std::optional<std::string>(absl::string_view)>&
          marked_node,
      std::optional<std::vector<RdzvParticipant>>* members,
      const std::set<std::string>& also_marked = {});

  const Deps d_;
  std::atomic<bool> end_acknowledged_{false};
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_EXIT_BARRIER_H_
