// The store keys of one job's rendezvous, all under rdzv/<run_id>/: built
// and parsed here only, so that the agent that writes them, `status` that
// reads them and the tests agree on one schema.
//
//   ctl/state          the round (RdzvState), changed only by compare-set
//   ctl/alive/<node>   each agent's lease, renewed every keep_alive_interval
//                      and gone keep_alive_interval x keep_alive_max_attempt
//                      after its agent stops renewing (on the store's clock)
//   ctl/waiting/<node> a lease held by a node that waits for the next round
//   ctl/state-aborted  why the job ended, for the nodes still running
//   ctl/state-host-left  the store's host leaves (its exit barrier timed out)
//   host               the node that hosts the store (ranked first)
//   protocol           the rendezvous protocol version, written by the
//                      job's first agent (protocol_version.h)
//   joined/<round>, join/<round>/<i>   an open round's count and records
//   round-info/<round>  what the round waits for, for people (round_info.h)
//   members/<round>/<closer>/<first>, rank/<round>/<closer>/<node>   a
//                      closed round's members (in chunks, each named by the
//                      rank of its first member) and one record per node,
//                      written by the node that closed it
//   master/<round>     MASTER_PORT MASTER_ADDR published by group rank 0
//   failed/<round>     the node whose worker failed first (it decides)
//   done/<round>/<node>, done-count/<round>, done-all/<round>, left/<round>
//                      the exit barrier
//   seen-end/<node>    a node read ctl/state-aborted or ctl/state-host-left
//   worker-store       who serves the workers' TCPStore, written by group
//                      rank 0 each round (rendezvous/worker_store_record.h)
//
// Only keys under ctl/ are watched for the whole of a round (see
// dynamic/dynamic_rendezvous.h): what is under it tells that the round stopped
// being the job's. Each member watches ctl/state, ctl/waiting/ and its next
// member's lease. The job's end and the host's leaving start with the
// state's key, so that one prefix watches and one listing of ctl/state
// reads all three: thousands of nodes wake up together when it changes.
#ifndef DISTJOB_RENDEZVOUS_RDZV_KEYS_H_
#define DISTJOB_RENDEZVOUS_RDZV_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace distjob {

// Every job's keys start with this.
inline constexpr absl::string_view kRdzvRoot = "rdzv/";

// The run id of `key` if it is a job's ctl/state key (one per job), else
// nullopt.
std::optional<std::string> ParseRdzvStateKey(absl::string_view key);
// The run id of `key` if it is a job's ctl/state or joined/<round> key:
// round 0 has no state until it closes, but its first join counts.
std::optional<std::string> ParseRdzvRunId(absl::string_view key);

class RdzvKeys {
 public:
  explicit RdzvKeys(const std::string& run_id);

  // rdzv/<run_id>/
  static std::string Prefix(const std::string& run_id);
  const std::string& prefix() const { return prefix_; }

  std::string Ctl() const { return prefix_ + "ctl/"; }
  std::string State() const { return prefix_ + "ctl/state"; }
  std::string AlivePrefix() const { return prefix_ + "ctl/alive/"; }
  std::string Alive(absl::string_view node) const;
  std::string WaitingPrefix() const { return prefix_ + "ctl/waiting/"; }
  std::string Waiting(absl::string_view node) const;
  std::string Aborted() const { return prefix_ + "ctl/state-aborted"; }
  std::string HostLeft() const { return prefix_ + "ctl/state-host-left"; }
  std::string Host() const { return prefix_ + "host"; }
  std::string Protocol() const { return prefix_ + "protocol"; }
  std::string Joined(int64_t round) const;
  std::string JoinPrefix(int64_t round) const;
  std::string RoundInfo(int64_t round) const;
  std::string Join(int64_t round, int64_t index) const;
  std::string MembersPrefix(int64_t round, absl::string_view closer) const;
  std::string Members(int64_t round, absl::string_view closer,
                      int64_t first) const;
  std::string Rank(int64_t round, absl::string_view closer,
                   absl::string_view node) const;
  std::string Master(int64_t round) const;
  std::string Failed(int64_t round) const;
  // A failure offered as round `round`'s root cause, and a communication
  // error offered beside it (ElasticRendezvous::OfferFailure).
  std::string OfferedFailure(int64_t round) const;
  std::string OfferedCommunicationError(int64_t round) const;
  std::string DonePrefix(int64_t round) const;
  std::string Done(int64_t round, absl::string_view node) const;
  std::string DoneCount(int64_t round) const;
  std::string DoneAll(int64_t round) const;
  std::string Left(int64_t round) const;
  std::string SeenEndPrefix() const { return prefix_ + "seen-end/"; }
  std::string WorkerStore() const { return prefix_ + "worker-store"; }
  // The job's latest root cause (ElasticRendezvous::SwapRootCause).
  std::string RootCause() const { return prefix_ + "root-cause"; }
  std::string SeenEnd(absl::string_view node) const;

  // The node of an Alive / Waiting / Done / SeenEnd key of this job, or
  // nullopt for any other key (a node name is non-empty, without '/').
  std::optional<std::string> ParseAlive(absl::string_view key) const;
  std::optional<std::string> ParseWaiting(absl::string_view key) const;
  std::optional<std::string> ParseDone(absl::string_view key,
                                       int64_t round) const;
  std::optional<std::string> ParseSeenEnd(absl::string_view key) const;
  // The join index (from 1) of a Join key of `round`, or nullopt.
  std::optional<int64_t> ParseJoin(absl::string_view key, int64_t round) const;
  // The first rank (from 0) of a Members chunk key of `round` and `closer`,
  // or nullopt.
  std::optional<int64_t> ParseMembers(absl::string_view key, int64_t round,
                                      absl::string_view closer) const;

 private:
  std::string prefix_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_KEYS_H_
