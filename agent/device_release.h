// The GPU-release fence between attempts (supervisor/device_fence.h), as
// the flags ask for it: how long to wait for the previous attempt's
// stragglers to let go of the accelerators, and what to do when they do
// not.
#ifndef DISTJOB_AGENT_DEVICE_RELEASE_H_
#define DISTJOB_AGENT_DEVICE_RELEASE_H_

#include <optional>
#include <string>
#include <vector>

#include "agent/cli/options.h"
#include "supervisor/supervisor.h"

namespace distjob {

// Kills the previous attempt's processes (those whose environment holds
// `marker`) that still hold a device file (`device_patterns`; empty: the
// usual ones) and waits for the devices, at most --device-release-timeout.
// Returns the reason the job must stop
// (--device-release-timeout-action stop and holders left), else nullopt:
// the attempt starts, with a warning naming each holder left.
std::optional<std::string> ReleaseDevices(
    const OutcomeOptions& options,
    const std::vector<std::string>& device_patterns, const std::string& marker,
    SupervisorInterface* supervisor);

}  // namespace distjob

#endif  // DISTJOB_AGENT_DEVICE_RELEASE_H_
