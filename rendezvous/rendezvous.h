// The rendezvous seen from the agent loop: join the next round, learn this
// node's place in it. Backends: standalone (this file's sibling), static,
// and the elastic c10d-style store.
#ifndef DISTJOB_RENDEZVOUS_RENDEZVOUS_H_
#define DISTJOB_RENDEZVOUS_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/store/store_stats.h"

namespace distjob {

struct RendezvousResult {
  int64_t round = 0;
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;   // global rank of this node's local rank 0
  int world_size = 1;  // workers in the round, all nodes
  std::string master_addr;
  int master_port = 0;
  std::string run_id;
  bool use_agent_store = false;
  // Failure restarts the job has made so far (the same on every node, so
  // TORCHELASTIC_RESTART_COUNT agrees across nodes).
  int restart_count = 0;
  // The part of Next spent blocked waiting for other nodes (to join, to
  // close the round, to decide after a failure), not on the store's own
  // answers: 0 for backends without peers.
  double peer_wait_seconds = 0;
};

// What WorkerStoreHost::AllowMembers admitted, for the round's record that
// `status` shows.
struct MemberAdmission {
  // Only loopback and the members' addresses may connect (the job has a
  // rendezvous token); false: anyone may.
  bool members_only = false;
  // Members admitted by at least one address.
  int admitted = 0;
  // Members with no address by the deadline: refused until a later round.
  std::vector<std::string> unresolved;
};

// The workers' TCPStore served by this agent (agent/worker_store), as the
// rendezvous drives it: group rank 0 serves it for as long as it stays rank
// 0, so the store outlives worker restarts and rounds (torchrun's
// TORCHELASTIC_USE_AGENT_STORE=True); any other rank stops it.
class WorkerStoreHost {
 public:
  virtual ~WorkerStoreHost() = default;
  // Serves on `host` (a numeric address, or a name: then every interface)
  // and `port` (0: a free one) unless already serving; the port served.
  virtual absl::StatusOr<int> Serve(const std::string& host, int port) = 0;
  // This agent is no longer the one that serves it.
  virtual void Stop() = 0;
  // The round's members' addresses (names or IPs): with a rendezvous token
  // only they and loopback may connect, since a TCPStore client cannot
  // present the token. The names are resolved in one pass, all at once,
  // bounded by `timeout` (thousands of members one after another would hold
  // the round); a member without an address by then is not admitted.
  // `cancelled` (the rendezvous' Cancel; may be unset) ends the pass within
  // a second: Cancelled, the last allow list kept. `admission`: what it
  // admitted.
  virtual absl::Status AllowMembers(const std::vector<std::string>& addrs,
                                    absl::Duration timeout,
                                    const std::function<bool()>& cancelled,
                                    MemberAdmission* admission) = 0;
  // A new round closed, or a one-node job starts its next attempt: the last
  // group's keys go (TcpStoreServer::Clear). An error: they may go later,
  // so no new group may be handed this store.
  virtual absl::Status Clear() = 0;
};

class ElasticRendezvous;

// What every backend does. Standalone and static rounds are fixed (this
// node decides alone, nothing changes under it); the elastic backends
// implement ElasticRendezvous on top.
class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round with `local_world_size` workers on this node and
  // blocks until the round closes. Unavailable / DeadlineExceeded when the
  // store cannot be reached in time (the agent exits retryable).
  virtual absl::StatusOr<RendezvousResult> Next(int local_world_size) = 0;

  // The elastic side of this backend, or nullptr when it has none: the
  // agent loop then owns every failure decision itself.
  virtual ElasticRendezvous* AsElastic() { return nullptr; }

  // The addresses of the nodes in the round as last read from the store,
  // so a caller whose Next failed can say who was there (and so who was
  // missing). Empty when the store was never read, or there is none.
  virtual std::vector<std::string> LastSeenAddrs() const { return {}; }

  // Makes a Next blocked on another thread return Cancelled soon (the
  // agent was told to stop while waiting). Shutdown still follows. A
  // backend whose Next does not block has nothing to cancel.
  virtual void Cancel() {}

  // What a blocked Next or Shutdown waits for now, for the termination
  // message of an agent stopped there ("the rendezvous round 3 (2/4 nodes
  // joined)"); "" when it waits for nothing. Called from another thread
  // before Cancel; takes at most a short store read, which also refreshes
  // LastSeenAddrs.
  virtual std::string WaitingFor() { return ""; }
  // WaitingFor with what a progress line adds (agent/stoppable_wait): who
  // joined, who has not finished, why the store is not reached, until
  // when; takes a few short store reads.
  virtual std::string WaitProgress() { return WaitingFor(); }

  // Called once when the agent is done with the job. `succeeded`: its
  // workers all succeeded, so it waits (exit barrier) for the other nodes
  // to finish rather than tearing the store down under them; otherwise the
  // other nodes are told the job ended. Nothing to do without a store.
  virtual void Shutdown(bool succeeded) { (void)succeeded; }

  // The agent stepped aside for a launcher its worker started
  // (docs/torchrun.md, "One launcher, always"): from now on no membership
  // change is reported and Shutdown says nothing to the other nodes (their
  // agents step aside the same way). The lease stays renewed and a hosted store
  // stays up until the rendezvous is destroyed: the inner launchers' rounds run
  // in it. Callable from any thread.
  virtual void Abandon() {}

  // Why this agent ends the job when it does not succeed (its one-line
  // outcome and root cause), set before Shutdown: the other nodes put it in
  // their own termination messages, so every pod names the root cause.
  // Without peers nobody reads it.
  virtual void SetEndReason(const std::string& reason) { (void)reason; }

  // Reads the store this agent hosts, at any time from any thread (the
  // agent's /metrics scrapes call it): nullptr when it hosts none; the
  // function answers nullopt once the store is gone.
  using StoreStatsSource = std::function<std::optional<StoreStats>()>;
  virtual StoreStatsSource HostedStoreStats() const { return nullptr; }
};

// A rendezvous whose membership changes while the job runs and whose nodes
// agree, through the store, on who decides after a failure. Pure virtual
// throughout: a default here (a ClaimFailure that always wins, say) would
// let a new backend decide for the whole job without ever asking its peers.
// What a node that lost a round's failure claim offers its decider.
enum class OfferedFailureKind {
  // Not a communication error: the round's root cause.
  kRootCause,
  // A communication error: no root cause by itself, but a deterministic
  // error on one node shows as one ("NCCL communicator was aborted"), and
  // whether its node or a peer's wins the claim is a race. The decider
  // records it beside its own failure, so the repeat is seen either way.
  kCommunication,
};

class ElasticRendezvous : public Rendezvous {
 public:
  ElasticRendezvous* AsElastic() final { return this; }

  // The agent restarts its group after a worker failure (restart number
  // `restart_count`): the next round carries the count to every node.
  virtual void NoteFailureRestart(int restart_count) = 0;

  // Called (from another thread) when the current round stops being the
  // job's round: a peer was lost, a node waits to join, another node began
  // a new round, or the store became unreachable. Set before Next.
  virtual void SetOnMembershipChange(std::function<void()> callback) = 0;

  // True once the change callback fired for the current round: a worker
  // failure seen after it belongs to that change, not to the workers.
  virtual bool MembershipChanged() const = 0;

  // Called when a local worker failed. True when this node's failure is
  // the first of the current round (the job's root cause, decided here);
  // false when another node's came first: a worker losing its peers
  // (gloo's "connection closed by peer") is collateral, and the node
  // re-rendezvouses to follow what the failing node decided.
  virtual bool ClaimFailure() = 0;

  // How long after a local failure a lost peer is certain to be seen
  // (MembershipChanged): its lease runs out, then the next member notices.
  // A worker whose error says a peer went away (gloo's "connection closed
  // by peer") fails before that: the agent waits this long before it takes
  // the failure for its own.
  virtual absl::Duration PeerLossWindow() const = 0;

  // Records `record` (the signatures of a decision's failures, one per
  // line: rank, exception type and message) as the job's latest root
  // cause, for every node that decides after it; returns the record before
  // it ("" for none, or when the store cannot say). The same cause twice in
  // a row is deterministic: restarting again wastes the budget.
  virtual std::string SwapRootCause(const std::string& record) = 0;

  // A node whose worker failed after another node's did offers its
  // failure (`failure`, opaque here) to the node that claimed the round:
  // that node may have claimed it with the collateral of this very failure
  // (its worker saw this one's sockets close before this node saw its
  // worker exit). The first offer of each kind in a round stays.
  virtual void OfferFailure(OfferedFailureKind kind,
                            const std::string& failure) = 0;

  // The failure of `kind` offered in the current round (OfferFailure), or
  // nullopt: none yet, or the store cannot say.
  virtual std::optional<std::string> OfferedFailure(
      OfferedFailureKind kind) = 0;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RENDEZVOUS_H_
