// TORCHELASTIC_HEALTH_CHECK_PORT served for real: torchrun's is a stub
// whose meaning is "alive while the watchdog saw progress lately". Any GET
// on that port answers 200 while the running group showed progress (its
// start, a FileTimer request, a heartbeat) within --health-progress-window,
// 503 otherwise; with no group running (before the first, between
// attempts) always 200. The body says how old the last progress is. On the
// HTTP server of agent/http_server, with its limits, started before the
// rendezvous.
#ifndef DISTJOB_AGENT_PROGRESS_HEALTH_H_
#define DISTJOB_AGENT_PROGRESS_HEALTH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/cli/options.h"
#include "observability/http_server.h"
#include "supervisor/supervisor.h"

namespace distjob {

// The answer at `now` for `progress`.
HttpAnswer ProgressAnswer(const ProgressSnapshot& progress, absl::Time now,
                          absl::Duration window);

// The endpoint over `supervisor` (which outlives it); nullptr when
// --health-check-port is 0. InvalidArgument naming the flag when the port
// cannot be bound.
absl::StatusOr<std::unique_ptr<HttpServer>> StartProgressHealth(
    const ObservabilityOptions& options, const SupervisorInterface* supervisor);

}  // namespace distjob

#endif  // DISTJOB_AGENT_PROGRESS_HEALTH_H_
