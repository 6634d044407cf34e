// The elastic (c10d-style) rendezvous over a StoreInterface, with its keys
// under rdzv/<run_id>/ (rendezvous/rdzv_keys.h lists them).
// Waits are store-side watches (no polling). One watcher thread per agent
// watches what tells that the current round stopped being the job's: the
// state keys, the waiting nodes and the lease of its next live member in
// rank order, so that neither a round's own traffic nor another member's
// lost lease wakes it; a wake-up costs no read when the store says what
// changed, a few small ones otherwise, whatever the job's size.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "rendezvous/node_lease.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rdzv_decide.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store/store_interface.h"
#include "rendezvous/wait_status.h"

namespace distjob {

struct WorkerStoreRecord;  // rendezvous/worker_store_record.h

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
  std::string SwapRootCause(const std::string& signature) override;
  void OfferRootFailure(const std::string& failure) override;
  std::optional<std::string> OfferedRootFailure() override;
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
  // (rendezvous/join_attempt.h).
  class JoinAttempt;

  // This node's rank record in the closed round last read (by round and
  // closer), so that a wake-up does not fetch it again.
  struct RankCache {
    int64_t round = -1;
    std::string closer;
    std::optional<RankRecord> mine;
    // The master's record, read with `mine` (IsKnownMember), or why it
    // could not be; unset: Result reads it.
    std::optional<absl::StatusOr<std::string>> master;
  };
  // Whether closed round `st` says this node is a member other than group
  // rank 0 without a read (RdzvState::leader).
  bool IsKnownMember(const RdzvState& st) const;
  // This node's rank record in closed round `st` (NotFound: no member),
  // and for a known member the master's record with it, in `cache`.
  absl::StatusOr<std::string> ReadRankRecord(const RdzvState& st,
                                             RankCache* cache);
  // Next's view of this node, for Decide.
  Progress CurrentProgress(absl::Time deadline, int64_t announced_round) const;
  // Reads what Decide needs (Observed): the end, the round, this node's
  // place in it, and the leases that decide whether to wait. `known`: the
  // state's key as a watch of the state's prefix from the last read saw
  // it change, the one change there up to `known_revision` (then the job
  // has not ended either): it is not read again.
  // `listed`: the state's listing, already read (AddRecordThenList);
  // taken from.
  Observed Observe(RankCache* cache,
                   const std::optional<WatchChange>& known = std::nullopt,
                   int64_t known_revision = 0, StoreListing* listed = nullptr);
  // Observe's steps; each false when `*o` is complete (an error, or the
  // job's end): the state and the job's end, this node's rank record in
  // closed round `st` (into `cache`), and whether any member of closed
  // round `st`, which this node is not in, is alive.
  bool ObserveState(const std::optional<WatchChange>& known,
                    int64_t known_revision, StoreListing* listed, Observed* o);
  bool ObserveRank(const RdzvState& st, RankCache* cache, Observed* o);
  void ObserveMembersAlive(const RdzvState& st, Observed* o);
  // `revision`: the store's revision `state` was written at.
  // `master`: the master's record if already read (RankCache::master).
  absl::StatusOr<RendezvousResult> Result(
      const RdzvState& state, const RankRecord& mine, int64_t revision,
      const std::optional<absl::StatusOr<std::string>>& master);
  // Group rank 0's part of Result: the port its workers' store listens at
  // (served by the agent when options_.worker_store, which then admits the
  // round's members, noted in `record`), then the master record, with the
  // workers' store record, in `r` and in the store.
  absl::StatusOr<int> MasterPort(const RdzvState& st,
                                 WorkerStoreRecord* record);
  absl::Status WriteMaster(const RdzvState& st, RendezvousResult* r);
  // Any other member's: the master record (`master` if already read) into
  // `r`.
  absl::Status ReadMaster(
      const RdzvState& st,
      const std::optional<absl::StatusOr<std::string>>& master,
      RendezvousResult* r);
  // A write the other nodes would have read, lost: the peers wait longer
  // (a lease or a deadline) for what it said, so the log says why.
  static void WarnIfLost(absl::string_view what, const absl::Status& s);
  // The round this node holds (or last held).
  int64_t CurrentRound();
  // Makes closed round `st` the one this node holds, and starts watching
  // it (from `revision`, the close's).
  void HoldRound(const RdzvState& st, const RankRecord& mine, int64_t revision);
  // Why a node outside the round waits to join ("node X waits to join"),
  // or "" when none does.
  std::string WaitingNode();
  // Adds the addresses of open round `round`'s joiners to last_seen_ (an
  // open round's state does not hold them), for LastSeenAddrs.
  void NoteJoinedAddrs(int64_t round);
  // The members of open round `round`, in join order, from their records;
  // `by_index`: they are join records 1..N, none missing; `counted`, if
  // set: N, the round's join count (at most max_nodes) when it was read.
  // A record counted but not written yet is waited for up to a lease, or,
  // with `wait_for_records` false, taken for missing at once.
  absl::StatusOr<std::vector<RdzvParticipant>> Joined(
      int64_t round, bool* by_index, int64_t* counted = nullptr,
      bool wait_for_records = true);
  // A closed round's `size` members in rank order, from its chunks.
  absl::StatusOr<std::vector<RdzvParticipant>> ReadMembers(
      int64_t round, const std::string& closer, int size);
  // Writes open round `st`'s members and rank records as this node would
  // close it; CloseState is then the state that closes it. `ahead`: during
  // its last call, where a join record on its way is not waited for (the
  // close at the call's end writes again, with it).
  absl::Status Close(const RdzvState& st, bool ahead = false);
  // Whether what Close last wrote still closes open round `st`: written
  // for that round from join records 1..N, and N nodes joined it still.
  bool CloseStillWritten(const RdzvState& st);
  RdzvState CloseState(const RdzvState& open) const;
  // The job's rendezvous protocol version against this agent's
  // (protocol_version.h), once per agent: OK once it matched.
  absl::Status CheckProtocolOnce();
  void HeartbeatLoop();
  void MonitorLoop();
  // The monitor's watch failed with `s` (the call began at `call_start`):
  // it stops monitoring, or the failure counts towards the store's loss
  // (read_timeout after `*failing_since`, the first failing call's start).
  void OnMonitorWatchFailed(const absl::Status& s, absl::Time call_start,
                            absl::Time* failing_since);
  // The monitor's watch (of generation `generation`) saw `w`: judged, and
  // a change of the round fired.
  void OnMonitorChange(const WatchResult& w, uint64_t generation);
  // Why the current round is no longer the job's, or "" if it still is;
  // sets `revision` to the store revision it read at. With `liveness` it
  // also looks at the next live member's lease and, that member lost,
  // opens the next round (only this node sees the loss).
  // `change`: what woke the monitor, when the store told it; a change that
  // tells all is judged without a read.
  std::string Judge(bool liveness, int64_t* revision,
                    const std::optional<WatchChange>& change = std::nullopt);
  // Judge's verdict from `change` alone, when it tells all (the round
  // reopened, the job ended, a node asks to join, a lease renewed);
  // nullopt: Judge reads. `revision`: the store's, where the watch saw it.
  std::optional<std::string> JudgeChange(const WatchChange& change,
                                         const RdzvState& current,
                                         const std::string& watched,
                                         int64_t revision);
  // Judge's liveness look: the lease of the next live member of `current`
  // after this node in rank order; a lost one opens the next round over
  // `state_raw` (the state as read).
  std::string JudgeRing(const RdzvState& current, const RankRecord& mine,
                        const std::string& state_raw);
  // The prefixes the monitor watches for the round it holds.
  std::vector<std::string> MonitorPrefixes();
  void Fire(const std::string& why);
  void StopThreads();
  // Tells the store this node has read why the job ended (once).
  void AcknowledgeEnd();
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
  // The store's host ending the job keeps the store up until every other
  // live member of `round` acknowledged the end, at most one lease.
  void AwaitEndSeen(const RdzvState& round);
  // Waits until every live member of `round` finished, at most
  // exit_barrier_timeout. False when it ended without that: the timeout
  // passed, the store went away or the wait was cancelled.
  bool ExitBarrier(const RdzvState& round);
  // Shutdown after this node's workers succeeded: the exit barrier, then
  // the host waits for the others to read its outcome (at most 5 s), or a
  // member counts its goodbye.
  void LeaveSucceeded(const RdzvState& round);
  // Shutdown's last call: closes the store, briefly when it was lost or
  // never held a round of this node's.
  void CloseStore();
  // The store's host leaving before every member finished (its exit
  // barrier timed out): says so under ctl/, so that the members still
  // running finish without the store rather than taking its loss for a
  // failure, and waits (at most one lease) until each has read it.
  void AnnounceHostLeaving(const RdzvState& round);

  using Wait = RdzvWait;
  // The members of `round` that did not pass its exit barrier yet, named
  // (at most a few), for WaitProgress.
  std::string Unfinished(const RdzvState& round);

  const DynamicRendezvousOptions options_;
  const RdzvKeys keys_;
  const absl::Duration lease_;
  std::unique_ptr<StoreInterface> store_;
  std::shared_ptr<void> keep_alive_;
  // This node's lease and its ask to join, renewed by the heartbeat.
  NodeLease node_lease_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool monitoring_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // see Abandon
  std::function<void()> on_change_ ABSL_GUARDED_BY(mu_);
  RdzvState current_ ABSL_GUARDED_BY(mu_);
  RankRecord current_rank_ ABSL_GUARDED_BY(mu_);
  // The member whose lease the monitor watches: the first after this node
  // in rank order still alive when last looked ("": none).
  std::string watched_peer_ ABSL_GUARDED_BY(mu_);
  // The state the monitor saw reopen the round (its one change since this
  // node's round closed), for Next's first read, and its revision.
  std::optional<WatchChange> reopened_ ABSL_GUARDED_BY(mu_);
  int64_t reopened_revision_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t current_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Counts the rounds the monitor was started for: a watch begun for an
  // earlier round (it lasts up to a lease) is not judged against this one.
  uint64_t monitor_generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Why another node ended the job, once seen: the store may be gone (its
  // host ended it) by the time Next runs.
  std::string aborted_ ABSL_GUARDED_BY(mu_);
  // What this node waits for, for WaitingFor and WaitProgress.
  WaitStatus wait_status_;
  // When the first of the renewals failing since the last success began
  // (InfiniteFuture: the last succeeded). The heartbeat thread's only.
  absl::Time renew_failing_since_ = absl::InfiniteFuture();
  mutable absl::Mutex seen_mu_;
  std::vector<std::string> last_seen_ ABSL_GUARDED_BY(seen_mu_);

  std::atomic<bool> changed_{false};
  std::atomic<bool> store_lost_{false};
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> closed_{false};  // this node closed its store view
  std::atomic<bool> end_acknowledged_{false};
  // The store's host announced it leaves after its workers succeeded
  // (ctl/host-left): the store's loss that follows is not a failure.
  std::atomic<bool> host_left_{false};
  int64_t last_round_ = -1;
  int pending_restarts_ = 0;
  // This node's place in the open round joined_round_ (1-based; past
  // max_nodes: the round was full), whether its join record is written, and
  // when it joined (its last call runs from there).
  int64_t joined_round_ = -1;
  int64_t join_index_ = 0;
  bool join_written_ = false;
  bool protocol_checked_ = false;  // CheckProtocolOnce
  absl::Time joined_at_;
  // What Close wrote, for CloseState.
  int closing_size_ = 0;
  int closing_world_ = 0;
  std::string closing_leader_;  // RdzvState::leader
  // The round Close last wrote (-1: none), from how many joins, and
  // whether from join records 1..N (CloseStillWritten).
  int64_t closing_round_ = -1;
  int64_t closing_joined_ = 0;
  bool closing_by_index_ = false;
  // The round whose close this node wrote during its last call (-1: none).
  int64_t prepared_round_ = -1;
  // The node whose failure claim won round decider_round_ (-1: none): it
  // decides whether the job restarts or ends.
  std::string decider_;
  int64_t decider_round_ = -1;
  bool shut_down_ = false;
  std::string end_reason_;  // see SetEndReason
  std::thread heartbeat_;
  // Started with the first round this node holds (a node that never holds
  // one has nothing to watch), under mu_, never after stop_.
  std::thread monitor_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_RENDEZVOUS_H_
