#include "discovery/accelerators.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace distjob {
namespace {

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A sysfs value: the file's text without surrounding whitespace.
std::string ReadTrimmed(const std::string& path) {
  return std::string(absl::StripAsciiWhitespace(ReadSmallFile(path)));
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string Join(const std::string& root, absl::string_view rel) {
  std::string base = root;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return absl::StrCat(base, "/", rel);
}

// KFD topology nodes with SIMDs are GPUs (CPU nodes have none); the pod
// can use one only if the device plugin gave it the render node.
int CountAmd(const std::string& root) {
  const std::string nodes = Join(root, "sys/class/kfd/kfd/topology/nodes");
  int count = 0;
  for (const std::string& node : ListDir(nodes)) {
    long simd = 0, minor = -1;
    for (absl::string_view line : absl::StrSplit(
             ReadTrimmed(absl::StrCat(nodes, "/", node, "/properties")),
             '\n')) {
      std::vector<absl::string_view> kv =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (kv.size() != 2) continue;
      // An unparsable value leaves the node out below: SimpleAtoi leaves
      // its output unspecified on failure, so it parses into a copy.
      long v = 0;
      if (!absl::SimpleAtoi(kv[1], &v)) continue;
      if (kv[0] == "simd_count") simd = v;
      if (kv[0] == "drm_render_minor") minor = v;
    }
    if (simd > 0 && minor >= 0 &&
        Exists(Join(root, absl::StrCat("dev/dri/renderD", minor)))) {
      ++count;
    }
  }
  return count;
}

int CountIntel(const std::string& root) {
  int count = 0;
  for (const std::string& name : ListDir(Join(root, "sys/class/drm"))) {
    if (!absl::StartsWith(name, "renderD")) continue;
    const std::string vendor = ReadTrimmed(
        Join(root, absl::StrCat("sys/class/drm/", name, "/device/vendor")));
    if (absl::AsciiStrToLower(vendor) == "0x8086" &&
        Exists(Join(root, absl::StrCat("dev/dri/", name)))) {
      ++count;
    }
  }
  return count;
}

}  // namespace

int NarrowByVisibleList(int present, absl::string_view list, bool subdevices) {
  int listed = 0;
  std::set<std::string> devices;
  for (absl::string_view id : absl::StrSplit(list, ',')) {
    id = absl::StripAsciiWhitespace(id);
    if (id.empty() || id == "-1" || absl::StartsWith(id, "-")) break;
    if (subdevices) {
      devices.insert(std::string(id.substr(0, id.find('.'))));
      listed = static_cast<int>(devices.size());
    } else {
      ++listed;
    }
  }
  return std::min(present, listed);
}

AcceleratorCounts CountAccelerators(const std::string& root,
                                    const EnvMap& env) {
  AcceleratorCounts counts;
  counts.nvidia =
      static_cast<int>(ListDir(Join(root, "proc/driver/nvidia/gpus")).size());
  if (auto visible = Lookup(env, "CUDA_VISIBLE_DEVICES")) {
    counts.nvidia = NarrowByVisibleList(counts.nvidia, *visible);
  }
  counts.amd = CountAmd(root);
  // ROCR_VISIBLE_DEVICES narrows the runtime, then HIP (or CUDA's
  // variable, which HIP also reads) narrows what is left.
  for (const char* var : {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                          "CUDA_VISIBLE_DEVICES"}) {
    if (auto visible = Lookup(env, var)) {
      counts.amd = NarrowByVisibleList(counts.amd, *visible);
    }
  }
  counts.intel = CountIntel(root);
  if (auto mask = Lookup(env, "ZE_AFFINITY_MASK"); mask && !mask->empty()) {
    counts.intel = NarrowByVisibleList(counts.intel, *mask, true);
  }
  return counts;
}

}  // namespace distjob
