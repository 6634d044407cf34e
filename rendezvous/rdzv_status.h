// `distjob-agent status`: the live state of one job's rendezvous (or of
// every job in the store), read from the store, as a table or JSON.
#ifndef DISTJOB_RENDEZVOUS_RDZV_STATUS_H_
#define DISTJOB_RENDEZVOUS_RDZV_STATUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

// `run_id` empty: every job found in the store.
absl::StatusOr<std::string> RenderRendezvousStatus(StoreInterface* store,
                                                   const std::string& run_id,
                                                   bool json);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_RDZV_STATUS_H_
