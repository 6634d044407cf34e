// The elastic (c10d-style) rendezvous over a StoreInterface.
//
// Keys under rdzv/<run_id>/:
//   state              the round (RdzvState), changed only by compare-set
//   alive/<node>       each agent's lease, renewed every keep_alive_interval
//                      and gone keep_alive_interval x keep_alive_max_attempt
//                      after its agent stops renewing (on the store's clock)
//   waiting/<node>     a lease held by a node that waits for the next round
//   master/<round>     MASTER_ADDR:MASTER_PORT published by group rank 0
//   done/<round>/<node>, left/<round>   the exit barrier
//   aborted            why the job ended, for the nodes still running
// Waits are store-side watches (no polling), and one watcher thread per
// agent reports when the current round stops being the job's round.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store_interface.h"

namespace distjob {

struct DynamicRendezvousOptions {
  std::string run_id = "none";
  int min_nodes = 1;
  int max_nodes = 1;
  std::string node;  // unique per agent process
  std::string addr;  // this node's address (MASTER_ADDR when rank 0)
  bool hosting = false;
  RdzvConfig config;
};

class DynamicRendezvous : public Rendezvous {
 public:
  // `keep_alive` holds what must outlive the rendezvous (the store server
  // when this agent hosts it); it is released last, in Shutdown.
  DynamicRendezvous(DynamicRendezvousOptions options,
                    std::unique_ptr<StoreInterface> store,
                    std::shared_ptr<void> keep_alive = nullptr);
  ~DynamicRendezvous() override;

  absl::StatusOr<RendezvousResult> Next(int local_world_size) override;
  void NoteFailureRestart(int restart_count) override;
  void SetOnMembershipChange(std::function<void()> callback) override;
  bool MembershipChanged() const override { return changed_; }
  std::vector<std::string> LastSeenAddrs() const override;
  void Cancel() override;
  void Shutdown(bool succeeded) override;
  bool ClaimFailure() override;
  void SetEndReason(const std::string& reason) override {
    end_reason_ = reason;
  }

  static std::string Prefix(const std::string& run_id) {
    return "rdzv/" + run_id + "/";
  }

 private:
  struct Read {
    RdzvState state;
    std::string raw;
    int64_t revision = 0;
  };
  std::string Key(const std::string& suffix) const {
    return Prefix(options_.run_id) + suffix;
  }
  absl::StatusOr<Read> ReadState();
  absl::StatusOr<RendezvousResult> Result(const RdzvState& state, int me);
  // Adds the addresses of open round `round`'s joiners to last_seen_ (an
  // open round's state does not hold them), for LastSeenAddrs.
  void NoteJoinedAddrs(int64_t round);
  // The members of open round `round`, in join order, from their records.
  absl::StatusOr<std::vector<RdzvParticipant>> Joined(int64_t round);
  absl::Status Heartbeat();
  void HeartbeatLoop();
  void MonitorLoop();
  // Why the current round is no longer the job's, or "" if it still is.
  // Without `liveness`, members missing from `listing` are not judged lost
  // (it holds only some keys).
  std::string RoundChange(const StoreListing& listing, bool liveness);
  void Fire(const std::string& why);
  void StopThreads();
  // Tells the store this node has read why the job ended (once).
  void AcknowledgeEnd();
  // The store's host ending the job keeps the store up until every other
  // live member of `round` acknowledged the end, at most one lease.
  void AwaitEndSeen(const RdzvState& round);

  const DynamicRendezvousOptions options_;
  const absl::Duration lease_;
  std::unique_ptr<StoreInterface> store_;
  std::shared_ptr<void> keep_alive_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool monitoring_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_change_ ABSL_GUARDED_BY(mu_);
  RdzvState current_ ABSL_GUARDED_BY(mu_);
  int64_t current_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Why another node ended the job, once seen: the store may be gone (its
  // host ended it) by the time Next runs.
  std::string aborted_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex seen_mu_;
  std::vector<std::string> last_seen_ ABSL_GUARDED_BY(seen_mu_);

  std::atomic<bool> changed_{false};
  std::atomic<bool> waiting_{false};
  std::atomic<bool> store_lost_{false};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> end_acknowledged_{false};
  int64_t last_round_ = -1;
  int pending_restarts_ = 0;
  // This node's place in the open round joined_round_ (1-based; past
  // max_nodes: the round was full), whether its join record is written, and
  // when it joined (its last call runs from there).
  int64_t joined_round_ = -1;
  int64_t join_index_ = 0;
  bool join_written_ = false;
  absl::Time joined_at_;
  // The node whose failure claim won round decider_round_ (-1: none): it
  // decides whether the job restarts or ends.
  std::string decider_;
  int64_t decider_round_ = -1;
  bool shut_down_ = false;
  std::string end_reason_;  // see SetEndReason
  std::thread heartbeat_;
  std::thread monitor_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_H_
