// The event loop every c-ares lookup of the agent runs: the agent never
// hands a name to glibc's resolver (a static binary would load the image's
// NSS modules), so each lookup drives its c-ares channel here.
#ifndef DISTJOB_COMMON_ARES_POLL_H_
#define DISTJOB_COMMON_ARES_POLL_H_

#include <ares.h>

#include <functional>

#include "absl/time/time.h"

namespace distjob {

// Processes `channel`'s sockets until no query is pending, `done` (if set)
// says so, or `deadline` passes. Queries still pending are the caller's to
// end (ares_destroy).
void PollAres(ares_channel channel, absl::Time deadline,
              const std::function<bool()>& done = nullptr);

}  // namespace distjob

#endif  // DISTJOB_COMMON_ARES_POLL_H_
