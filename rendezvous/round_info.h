// What an open round waits for, published for `distjob-agent status`: an
// open round has no state until it closes (round 0 has no state key at
// all), and its members' join records say who came, not how many are
// needed or how long the last call lasts. One small record per round,
// round-info/<round>, written by the node that joined it first and again,
// with the last call's end, by the node whose join began the last call.
// Nothing in the rendezvous reads it: it is for people.
#ifndef DISTJOB_RENDEZVOUS_ROUND_INFO_H_
#define DISTJOB_RENDEZVOUS_ROUND_INFO_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

struct RoundInfo {
  int min_nodes = 0;
  int max_nodes = 0;
  absl::Duration last_call_timeout = absl::ZeroDuration();
  // Once min_nodes joined and fewer than max_nodes: when the round closes
  // unless it fills first, on the clock of the node that wrote it.
  std::optional<absl::Time> last_call_ends;
};

std::string EncodeRoundInfo(const RoundInfo& info);
absl::StatusOr<RoundInfo> DecodeRoundInfo(absl::string_view text);

// Writes `info` as round `round`'s record (`key`), best effort: a status
// line is not worth a join's retry, so a failure is only logged (debug).
void PublishRoundInfo(StoreInterface* store, const std::string& key,
                      int64_t round, const RoundInfo& info);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_ROUND_INFO_H_
