// The elastic (c10d-style) rendezvous over a StoreInterface, with its keys
// under rdzv/<run_id>/ (rendezvous/rdzv_keys.h lists them).
// Waits are store-side watches (no polling). A facade over collaborators
// that each do one job: the join attempt (one call of Next, one method per
// Decide action) with what it reads (round_observer), how it closes a
// round (round_close) and where the round's workers meet (master_record);
// this node's lease (node_lease, renewed by the heartbeat thread here);
// the round monitor (one watcher thread per agent, which sees the round it
// holds end while its workers run); the failure claim; the exit barrier
// (Shutdown); and what the node says it waits for (wait_report). The
// facade owns the store, the options and the flags they share.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_DYNAMIC_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_DYNAMIC_RENDEZVOUS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "rendezvous/dynamic/exit_barrier.h"
#include "rendezvous/dynamic/failure_claim.h"
#include "rendezvous/dynamic/join_state.h"
#include "rendezvous/dynamic/master_record.h"
#include "rendezvous/dynamic/node_lease.h"
#include "rendezvous/dynamic/rdzv_decide.h"
#include "rendezvous/dynamic/round_close.h"
#include "rendezvous/dynamic/round_monitor.h"
#include "rendezvous/dynamic/round_observer.h"
#include "rendezvous/dynamic/wait_report.h"
#include "rendezvous/dynamic/wait_status.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

struct DynamicRendezvousOptions {
  std::string run_id = "none";
  // The run id the keys live under, when not run_id (RendezvousParams).
  std::string key_run_id;
  int min_nodes = 1;
  int max_nodes = 1;
  std::string node;  // unique per agent process
  std::string addr;  // this node's address (MASTER_ADDR when rank 0)
  // Written in this node's join record: its rank order (rdzv_state.h).
  std::string pod_index;
  std::string order_key;
  bool hosting = false;
  // The hosted store's stats (set by c10d_rendezvous when hosting).
  Rendezvous::StoreStatsSource store_stats;
  RdzvConfig config;
  // False: no heartbeat thread; the owner calls RenewLease at
  // NextRenewal instead. A simulator of thousands of nodes in one
  // process (bench/store_bench.cc) runs out of threads otherwise.
  bool heartbeat_thread = true;

  // Group rank 0 serves the workers' TCPStore through this; nullptr:
  // worker rank 0 hosts it at a free port of each round.
  std::shared_ptr<WorkerStoreHost> worker_store;
  // Without worker_store: the setting that opted out ("--worker-store
  // worker"), written in the round's worker-store record for `status`.
  std::string worker_store_off;
  // Where group rank 0's workers' store (or, without one, worker rank 0's)
  // listens: an explicit --master-port of a one-node job; 0: a free port.
  int worker_store_port = 0;
};

class DynamicRendezvous : public ElasticRendezvous {
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
  std::string WaitingFor() override;
  std::string WaitProgress() override;
  void Shutdown(bool succeeded) override;
  void Abandon() override;
  bool ClaimFailure() override;
  absl::Duration PeerLossWindow() const override;
  std::string SwapRootCause(const std::string& record) override;
  void OfferFailure(OfferedFailureKind kind,
                    const std::string& failure) override;
  std::optional<std::string> OfferedFailure(OfferedFailureKind kind) override;
  void SetEndReason(const std::string& reason) override {
    end_reason_ = reason;
  }
  StoreStatsSource HostedStoreStats() const override {
    return options_.store_stats;
  }

  static std::string Prefix(const std::string& run_id) {
    return RdzvKeys::Prefix(run_id);
  }

  // Renews this node's lease once: what the heartbeat thread does at
  // NextRenewal (see DynamicRendezvousOptions::heartbeat_thread).
  void RenewLease();
  // When the heartbeat renews next: one keep_alive_interval after the last
  // renewal, or after `last_attempt` (a failed one) if that is later. A
  // join renews too (LeaseThenAddRecord), so a node that just joined does
  // not renew again at once: at a round of thousands of new nodes, a
  // renewal per node that would fall while the round closes.
  absl::Time NextRenewal(absl::Time last_attempt) const;

 private:
  // One call of Next, its steps and what it keeps between them
  // (join_attempt.h).
  class JoinAttempt;

  // Next's view of this node, for Decide.
  Progress CurrentProgress(absl::Time deadline, int64_t announced_round) const;
  // `revision`: the store's revision `state` was written at.
  // `master`: the master's record if already read
  // (RoundObserver::RankCache::master).
  absl::StatusOr<RendezvousResult> Result(
      const RdzvState& state, const RankRecord& mine, int64_t revision,
      const std::optional<absl::StatusOr<std::string>>& master);
  // The job's rendezvous protocol version against this agent's
  // (protocol_version.h), once per agent: OK once it matched.
  absl::Status CheckProtocolOnce();
  void HeartbeatLoop();
  void StopThreads();
  // Shutdown's last call: closes the store, briefly when it was lost or
  // never held a round of this node's.
  void CloseStore();

  using Wait = RdzvWait;

  const DynamicRendezvousOptions options_;
  const RdzvKeys keys_;
  const absl::Duration lease_;
  std::unique_ptr<StoreInterface> store_;
  std::shared_ptr<void> keep_alive_;
  // This node's lease and its ask to join, renewed by the heartbeat.
  NodeLease node_lease_;
  // How this node leaves the job (Shutdown), and its mark that it read
  // why the job ended.
  ExitBarrier exit_;

  // The heartbeat thread's stop.
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // What this node waits for, for WaitingFor and WaitProgress.
  WaitStatus wait_status_;
  // When the first of the renewals failing since the last success began
  // (InfiniteFuture: the last succeeded). The heartbeat thread's only.
  absl::Time renew_failing_since_ = absl::InfiniteFuture();

  std::atomic<bool> changed_{false};
  std::atomic<bool> store_lost_{false};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> closed_{false};  // this node closed its store view
  // The store's host announced it leaves after its workers succeeded
  // (ctl/host-left): the store's loss that follows is not a failure.
  std::atomic<bool> host_left_{false};
  int64_t last_round_ = -1;
  // This node's place in the round it joined last.
  JoinState join_;
  bool protocol_checked_ = false;  // CheckProtocolOnce
  // The round whose close this node wrote during its last call (-1: none).
  int64_t prepared_round_ = -1;
  bool shut_down_ = false;
  std::string end_reason_;  // see SetEndReason
  std::thread heartbeat_;
  // The round this node holds, watched while its workers run.
  RoundMonitor monitor_;
  // Which node decides after a worker failure, and the shared root cause.
  FailureClaim failure_;
  // What this node wrote to close a round.
  RoundClose close_;
  // Where each round's workers meet: written by group rank 0, read by all.
  MasterRecord master_;
  // What this node says it waits for, and the addresses it last saw.
  WaitReport report_;
  // Next's reads of the store, for Decide.
  RoundObserver observer_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_DYNAMIC_RENDEZVOUS_H_
