#include "supervisor/device_fence.h"

#include <dirent.h>
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/logging.h"

namespace distjob {
namespace {

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  return names;
}

std::string ReadLink(const std::string& path) {
  char target[4096];
  const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

bool IsDevice(const std::string& path,
              const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    if (fnmatch(pattern.c_str(), path.c_str(), FNM_PATHNAME) == 0) return true;
  }
  return false;
}

// Whether `pid`'s environ holds `marker`. A process that exec'd with a
// fresh environment is not recognised: it is also no longer the worker's
// program, and the drain before the fence already killed it if it was the
// agent's descendant.
bool CarriesMarker(const std::string& proc_root, const std::string& pid,
                   const std::string& marker) {
  const std::string environ =
      ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/environ"), 1 << 20);
  for (absl::string_view entry : absl::StrSplit(environ, '\0')) {
    if (entry == marker) return true;
  }
  return false;
}

}  // namespace

std::string DeviceFenceMarker(pid_t agent_pid, absl::Time started) {
  return absl::StrCat(kDeviceFenceVariable, "=", agent_pid, "-",
                      absl::ToUnixNanos(started));
}

std::vector<std::string> DevicesHeldBy(const DeviceFenceOptions& options,
                                       pid_t pid) {
  const std::string fd_dir = absl::StrCat(options.proc_root, "/", pid, "/fd");
  std::set<std::string> held;
  for (const std::string& fd : ListDir(fd_dir)) {
    std::string target = ReadLink(absl::StrCat(fd_dir, "/", fd));
    if (IsDevice(target, options.device_patterns)) {
      held.insert(std::move(target));
    }
  }
  return {held.begin(), held.end()};
}

std::vector<DeviceHolder> FindDeviceHolders(const DeviceFenceOptions& options,
                                            pid_t self) {
  std::vector<DeviceHolder> holders;
  for (const std::string& name : ListDir(options.proc_root)) {
    int pid = 0;
    if (!absl::SimpleAtoi(name, &pid) || pid <= 0 || pid == self) continue;
    const std::vector<std::string> held = DevicesHeldBy(options, pid);
    if (held.empty() ||
        !CarriesMarker(options.proc_root, name, options.marker)) {
      continue;
    }
    for (const std::string& path : held) holders.push_back({pid, path});
  }
  return holders;
}

std::vector<DeviceHolder> WaitForDeviceRelease(
    const DeviceFenceOptions& options, pid_t self, absl::Duration timeout,
    const FencePause& pause, const std::function<void(pid_t)>& killer) {
  std::vector<DeviceHolder> holders = FindDeviceHolders(options, self);
  if (holders.empty()) return holders;
  const absl::Time deadline = absl::Now() + timeout;
  std::set<pid_t> killed;
  for (const DeviceHolder& h : holders) {
    DJ_LOG_WARNING(
        "pid {} of the previous attempt still holds {}: killing it and "
        "waiting up to {} (--device-release-timeout) for the device",
        h.pid, h.path, absl::FormatDuration(timeout));
    if (!killed.insert(h.pid).second) continue;
    if (killer) {
      killer(h.pid);
    } else if (kill(h.pid, SIGKILL) != 0 && errno != ESRCH) {
      DJ_LOG_WARNING("cannot kill pid {}: {}", h.pid, std::strerror(errno));
    }
  }
  while (!holders.empty()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    if (!pause(std::min(absl::Milliseconds(20), deadline - now))) break;
    holders = FindDeviceHolders(options, self);
  }
  if (holders.empty()) {
    DJ_LOG_INFO("the previous attempt's processes released the devices");
  }
  return holders;
}

}  // namespace distjob
