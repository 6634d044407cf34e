#include "agent/device_release.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "supervisor/device_fence.h"

namespace distjob {

std::optional<std::string> ReleaseDevices(
    const OutcomeOptions& options,
    const std::vector<std::string>& device_patterns, const std::string& marker,
    SupervisorInterface* supervisor) {
  DeviceFenceOptions fence;
  if (!device_patterns.empty()) fence.device_patterns = device_patterns;
  fence.marker = marker;
  // The supervisor's Sleep reaps the killed stragglers (the agent is their
  // subreaper) and ends the wait on a stop signal.
  const std::vector<DeviceHolder> left = WaitForDeviceRelease(
      fence, getpid(), options.device_release_timeout,
      [supervisor](absl::Duration d) { return supervisor->Sleep(d); });
  if (left.empty() || supervisor->stop_signal() != 0) return std::nullopt;
  std::vector<std::string> named;
  for (const DeviceHolder& h : left) {
    named.push_back(absl::StrCat("pid ", h.pid, " holds ", h.path));
  }
  const std::string held = absl::StrCat(
      "the previous attempt's processes still hold the devices after ",
      absl::FormatDuration(options.device_release_timeout),
      " (--device-release-timeout): ", absl::StrJoin(named, ", "));
  if (options.device_release_stop) return held;
  DJ_LOG_WARNING("{}; starting the attempt anyway", held);
  return std::nullopt;
}

}  // namespace distjob
