// The GPU-release fence: before an attempt starts, no process of the
// previous one may still hold an accelerator's device file. A CUDA context
// is released only when the last descriptor on /dev/nvidia* closes; a
// straggler (escaped from its process group, or slow to finish exiting)
// would make the new attempt's workers fail with "device busy" or run out
// of GPU memory, a failure that is not theirs.
//
// Holders are found through /proc/*/fd (readlink), which sees every
// process whatever its group or parent; a process belongs to this agent's
// attempts when its environment carries the agent's marker variable, which
// every worker gets and its children inherit.
#ifndef DISTJOB_SUPERVISOR_DEVICE_FENCE_H_
#define DISTJOB_SUPERVISOR_DEVICE_FENCE_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace distjob {

// The variable the agent sets in every worker's environment; its value is
// the agent's marker (DeviceFenceMarker).
inline constexpr char kDeviceFenceVariable[] = "DISTJOB_AGENT_INSTANCE";

struct DeviceFenceOptions {
  // Where /proc is; tests point it at a fake tree.
  std::string proc_root = "/proc";
  // fnmatch(3) patterns of the device files that pin an accelerator.
  std::vector<std::string> device_patterns = {"/dev/nvidia*", "/dev/dri/*",
                                              "/dev/kfd", "/dev/accel*"};
  // "NAME=VALUE" that a process of this agent's attempts has in its
  // environ.
  std::string marker;
};

struct DeviceHolder {
  pid_t pid = 0;
  std::string path;  // the device file it holds open
};

// "DISTJOB_AGENT_INSTANCE=<pid>-<ns since epoch>": unique to this agent
// process, also across restarts of the container (same pid, later time).
std::string DeviceFenceMarker(pid_t agent_pid, absl::Time started);

// The device files (options.device_patterns) that `pid` holds open, each
// once; empty when none or when the process is gone.
std::vector<std::string> DevicesHeldBy(const DeviceFenceOptions& options,
                                       pid_t pid);

// Every process (not `self`) carrying options.marker and holding one of
// the device files open, one entry per process and path.
std::vector<DeviceHolder> FindDeviceHolders(const DeviceFenceOptions& options,
                                            pid_t self);

// What WaitForDeviceRelease does between checks (the agent: reap and read
// signals); returns false to give up (a stop signal).
using FencePause = std::function<bool(absl::Duration)>;

// SIGKILLs every holder (they outlived the previous attempt's drain),
// then waits up to `timeout` for their descriptors to close, logging each
// holder's pid and path. Returns the holders left at the deadline (empty:
// the devices are free). `killer` sends the signal (tests: a fake).
std::vector<DeviceHolder> WaitForDeviceRelease(
    const DeviceFenceOptions& options, pid_t self, absl::Duration timeout,
    const FencePause& pause,
    const std::function<void(pid_t)>& killer = nullptr);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_DEVICE_FENCE_H_
