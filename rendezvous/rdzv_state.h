// The shared state of one job's rendezvous, as stored under
// rdzv/<run_id>/state and changed only by compare-set. Liveness is NOT in
// it (each node has its own lease key), so heartbeats never rewrite it.
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
  // Join order while open; rank order once closed.
  std::vector<RdzvParticipant> participants;

  int Find(const std::string& node) const;  // index or -1
  std::string Encode() const;
  static absl::StatusOr<RdzvState> Decode(const std::string& text);

  // Orders the participants for closing: `host` first if present, then
  // those of the previous round in their old order, then the newcomers in
  // join order.
  void AssignRanks(const std::string& host);
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_STATE_H_
