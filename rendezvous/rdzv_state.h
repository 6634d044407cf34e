// The shared state of one job's rendezvous, as stored under
// rdzv/<run_id>/state and changed only by compare-set: opened, closed (with
// its members in rank order), a restart noted. Neither liveness (each node
// has its own lease key) nor joining (each node writes its own join key) is
// in it, so neither heartbeats nor joins rewrite it.
#ifndef DISTJOB_RENDEZVOUS_RDZV_STATE_H_
#define DISTJOB_RENDEZVOUS_RDZV_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace distjob {

struct RdzvParticipant {
  std::string node;  // unique per agent process
  int nproc = 1;
  std::string addr;  // MASTER_ADDR if it becomes group rank 0
};

struct RdzvState {
  int64_t round = 0;
  bool closed = false;
  int restart_count = 0;
  // Rank order of the last closed round: ranks stay stable across rounds.
  std::vector<std::string> previous;
  // Empty while open (the joiners are under join/<round>/); rank order
  // once closed.
  std::vector<RdzvParticipant> participants;

  int Find(const std::string& node) const;  // index or -1
  std::string Encode() const;
  static absl::StatusOr<RdzvState> Decode(const std::string& text);

  // Orders the participants for closing: `host` first if present, then
  // those of the previous round in their old order, then the newcomers in
  // join order.
  void AssignRanks(const std::string& host);
};

// A node's record in an open round, under join/<round>/<join index>: each
// node writes its own key, so joining is one request and never contends.
std::string EncodeJoin(const RdzvParticipant& p);
absl::StatusOr<RdzvParticipant> DecodeJoin(const std::string& text);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_STATE_H_
