// The container cgroup's OOM-kill counter, read before a worker group
// starts and after it ends: a rise means the kernel's OOM killer ended a
// process, which tells an OOM kill (137) from the agent's own SIGKILL and
// from an external `kill -9`.
//   cgroup v2: memory.events, "oom_kill N"
//   cgroup v1: memory.oom_control, "oom_kill N"
#ifndef DISTJOB_SUPERVISOR_CGROUP_OOM_H_
#define DISTJOB_SUPERVISOR_CGROUP_OOM_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

// The "oom_kill N" value in a memory.events or memory.oom_control text.
std::optional<int64_t> ParseOomKillCount(absl::string_view text);

// The counter file for the cgroup described by `proc_self_cgroup` (the text
// of /proc/self/cgroup), under the cgroup mounts at `root` (normally
// /sys/fs/cgroup); nullopt when none exists.
std::optional<std::string> FindOomCounterFile(
    absl::string_view proc_self_cgroup, const std::string& root);

class OomCounter {
 public:
  // The agent's own cgroup; a counter that reads nothing when there is none.
  static OomCounter ForSelf();
  explicit OomCounter(std::optional<std::string> path)
      : path_(std::move(path)) {}

  // The current count, nullopt when unavailable.
  std::optional<int64_t> Read() const;
  const std::optional<std::string>& path() const { return path_; }

 private:
  std::optional<std::string> path_;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_CGROUP_OOM_H_
