// The records of one job's rendezvous under rdzv/<run_id>/.
//
// The round (RdzvState, ctl/state) is small whatever the job's size, and
// changed only by compare-set: opened, closed, a restart noted. The members
// of a closed round are written once by the node that closed it, before its
// compare-set: the whole list (members/<round>/<closer>, read only where
// the list is needed: the next round's closer, a node waiting outside the
// round, the exit barrier while a member is late, the status command) and
// one rank record per node (rank/<round>/<closer>/<node>), so that each of
// N nodes reads O(1) bytes to learn its place instead of the whole list.
#ifndef DISTJOB_RENDEZVOUS_RDZV_STATE_H_
#define DISTJOB_RENDEZVOUS_RDZV_STATE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace distjob {

struct RdzvParticipant {
  RdzvParticipant() = default;
  // The topology fields are optional: most records have neither.
  RdzvParticipant(std::string node_, int nproc_, std::string addr_,
                  std::string pod_index_ = "", std::string order_key_ = "")
      : node(std::move(node_)),
        nproc(nproc_),
        addr(std::move(addr_)),
        pod_index(std::move(pod_index_)),
        order_key(std::move(order_key_)) {}

  std::string node;  // unique per agent process
  int nproc = 1;
  std::string addr;  // MASTER_ADDR if it becomes group rank 0
  // Where the pod sits in its controller's order (JOB_COMPLETION_INDEX,
  // the JobSet's job and pod index, LWS_WORKER_INDEX): dotted non-negative
  // integers compared part by part, e.g. "3" or "1.0"; "" when none.
  std::string pod_index;
  // --rank-order-key (a rack or block label): members sharing it get
  // adjacent ranks; "" when none. No whitespace.
  std::string order_key;
};

// Whether `index` is a pod index as RdzvParticipant::pod_index holds it.
bool IsPodIndex(const std::string& index);

struct RdzvState {
  int64_t round = 0;
  bool closed = false;
  int restart_count = 0;
  // Once closed: the node whose records hold the members (two nodes may
  // try to close a round with different counts; only one compare-set
  // wins), how many nodes and how many processes in all.
  std::string closer;
  int size = 0;
  int world_size = 0;
  // Once closed, when its members are exactly the join records 1..size
  // (none was missing at the close): group rank 0's node. A node that
  // joined at an index up to `size` then knows it is a member, and a
  // member other than `leader` can wait for the master's record with its
  // own rank record in one request. "": not known (read the rank record
  // first).
  std::string leader;
  // The last closed round, whose rank order the next close keeps so that
  // ranks stay stable across rounds (-1: none).
  int64_t prev_round = -1;
  std::string prev_closer;
  int prev_size = 0;  // its members, as its chunks hold them

  std::string Encode() const;
  static absl::StatusOr<RdzvState> Decode(const std::string& text);
};

// The round that follows `current` (open, no members yet), counting at
// least `restart_count` restarts. Its close keeps the rank order of
// `current` if that closed, else the order `current` would have kept.
// Every opener of a round (a node that finds its round over, the member
// that sees a peer lost) builds it here, so they all write the same state.
RdzvState NextRound(const RdzvState& current, int restart_count);

// A closed round's members in rank order, one "node nproc addr" line each.
std::string EncodeMembers(const std::vector<RdzvParticipant>& members);
absl::StatusOr<std::vector<RdzvParticipant>> DecodeMembers(
    const std::string& text);

// The member list split into chunks of at most `max_bytes` each (a member
// whose line alone is longer gets a chunk of its own), by the rank of each
// chunk's first member: the values of members/<round>/<closer>/<first>.
// 256 KiB keeps a chunk at a quarter of the store's default
// max_value_bytes and a gRPC message well under its 4 MiB default.
inline constexpr size_t kMemberChunkBytes = size_t{256} << 10;
std::vector<std::pair<int64_t, std::string>> EncodeMemberChunks(
    const std::vector<RdzvParticipant>& members,
    size_t max_bytes = kMemberChunkBytes);
// The first `size` members from chunks by first rank, in any order: the
// chunk at rank 0, then the one that starts where it ended, and so on.
// Chunks off that chain or past `size` are ignored: a closer that wrote
// its list again (fewer members after a retry, or more after a node joined
// during its last call) may have left some of its first write's.
absl::StatusOr<std::vector<RdzvParticipant>> AssembleMembers(
    std::vector<std::pair<int64_t, std::string>> chunks, int size);

// Orders the members of a closing round: `host` first if present, then
// those of `previous` (the last round's rank order) in their old order,
// then the newcomers in join order. When any member has a pod index or an
// order key, the topology decides first: members with a pod index come in
// index order, ahead of those without (which keep the order above), and
// members sharing an order key are moved next to the first of them. The
// order depends only on who the members are, so ranks stay stable across
// rounds of the same members.
void AssignRanks(const std::string& host,
                 const std::vector<std::string>& previous,
                 std::vector<RdzvParticipant>* members);

// One node's place in a closed round, and the member after it in rank
// order (wrapping), whose lease this node watches: every loss is seen by
// the first live member before it, and no node watches all N.
struct RankRecord {
  int group_rank = 0;
  int base_rank = 0;  // the global rank of its first process
  std::string next;
};
std::string EncodeRank(const RankRecord& r);
absl::StatusOr<RankRecord> DecodeRank(const std::string& text);
// One record per member of `members` (in rank order), by node name.
std::vector<std::pair<std::string, RankRecord>> RankRecords(
    const std::vector<RdzvParticipant>& members);

// A node's record in an open round, under join/<round>/<join index>: each
// node writes its own key, so joining is one request and never contends.
std::string EncodeJoin(const RdzvParticipant& p);
absl::StatusOr<RdzvParticipant> DecodeJoin(const std::string& text);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_STATE_H_
