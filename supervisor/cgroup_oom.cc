#include "supervisor/cgroup_oom.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace distjob {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

}  // namespace

std::optional<int64_t> ParseOomKillCount(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t n = 0;
    if (kv.size() == 2 && kv[0] == "oom_kill" && absl::SimpleAtoi(kv[1], &n)) {
      return n;
    }
  }
  return std::nullopt;
}

std::optional<std::string> FindOomCounterFile(
    absl::string_view proc_self_cgroup, const std::string& root) {
  std::string v1_path, v2_path;
  bool have_v1 = false, have_v2 = false;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) {
      have_v2 = true;
      v2_path = std::string(f[2]);
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c == "memory") {
        have_v1 = true;
        v1_path = std::string(f[2]);
      }
    }
  }
  // Inside a cgroup namespace (or a container with its own mount) the
  // listed path may not exist under the mount: the mount root is ours then.
  std::vector<std::string> candidates;
  if (have_v1) {
    candidates.push_back(
        absl::StrCat(root, "/memory", v1_path, "/memory.oom_control"));
    candidates.push_back(absl::StrCat(root, "/memory/memory.oom_control"));
  }
  if (have_v2) {
    for (const char* mount : {"", "/unified"}) {
      candidates.push_back(
          absl::StrCat(root, mount, v2_path, "/memory.events"));
      candidates.push_back(absl::StrCat(root, mount, "/memory.events"));
    }
  }
  for (std::string& c : candidates) {
    absl::StrReplaceAll({{"//", "/"}}, &c);
    if (Exists(c)) return c;
  }
  return std::nullopt;
}

OomCounter OomCounter::ForSelf() {
  return OomCounter(
      FindOomCounterFile(ReadFile("/proc/self/cgroup"), "/sys/fs/cgroup"));
}

std::optional<int64_t> OomCounter::Read() const {
  if (!path_.has_value()) return std::nullopt;
  return ParseOomKillCount(ReadFile(*path_));
}

}  // namespace distjob
