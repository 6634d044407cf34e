#include "supervisor/numa.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace distjob {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

std::vector<std::string> List(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Index of `rank` among the ranks whose GPU is on the same NUMA node, and
// how many there are.
std::pair<int, int> ShareOfNode(int local_rank, int nproc,
                                const NumaTopology& t, int node,
                                int (*node_of)(int, const NumaTopology&)) {
  int index = 0, count = 0;
  for (int r = 0; r < nproc; ++r) {
    if (node_of(r, t) != node) continue;
    if (r < local_rank) ++index;
    ++count;
  }
  return {index, std::max(count, 1)};
}

int NodeOf(int local_rank, const NumaTopology& t) {
  if (static_cast<size_t>(local_rank) < t.gpu_node.size()) {
    return t.gpu_node[static_cast<size_t>(local_rank)];
  }
  // No GPU for this rank: spread the ranks over the nodes.
  auto it = t.node_cpus.begin();
  std::advance(it, local_rank % static_cast<int>(t.node_cpus.size()));
  return it->first;
}

}  // namespace

std::vector<int> ParseCpuList(absl::string_view list) {
  std::vector<int> cpus;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(range[0], &lo)) continue;
    hi = lo;
    if (range.size() == 2 && !absl::SimpleAtoi(range[1], &hi)) continue;
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

absl::StatusOr<NumaMode> ParseNumaMode(absl::string_view value) {
  if (value == "node") return NumaMode::kNode;
  if (value == "socket") return NumaMode::kSocket;
  if (value == "exclusive") return NumaMode::kExclusive;
  if (value == "core-complex") return NumaMode::kCoreComplex;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", value, "' is not one of node, socket, exclusive, core-complex"));
}

absl::StatusOr<NumaTopology> ReadNumaTopology(const std::string& root) {
  NumaTopology t;
  const std::string nodes = root + "/sys/devices/system/node";
  for (const std::string& name : List(nodes)) {
    int node = 0;
    if (!absl::StartsWith(name, "node") ||
        !absl::SimpleAtoi(absl::string_view(name).substr(4), &node)) {
      continue;
    }
    std::vector<int> cpus =
        ParseCpuList(Read(absl::StrCat(nodes, "/", name, "/cpulist")));
    if (!cpus.empty()) t.node_cpus[node] = std::move(cpus);
  }
  if (t.node_cpus.empty()) {
    return absl::NotFoundError(absl::StrCat("no NUMA nodes under ", nodes));
  }
  for (const auto& [node, cpus] : t.node_cpus) {
    for (int cpu : cpus) {
      const std::string dir =
          absl::StrCat(root, "/sys/devices/system/cpu/cpu", cpu);
      int socket = 0;
      if (!absl::SimpleAtoi(Read(dir + "/topology/physical_package_id"),
                            &socket)) {
        socket = node;
      }
      t.cpu_socket[cpu] = socket;
      std::vector<int> l3 =
          ParseCpuList(Read(dir + "/cache/index3/shared_cpu_list"));
      t.cpu_l3[cpu] = l3.empty() ? cpu : l3.front();
    }
  }
  for (const std::string& bdf : List(root + "/proc/driver/nvidia/gpus")) {
    int node = -1;
    std::string pci = absl::AsciiStrToLower(bdf);
    if (!absl::SimpleAtoi(Read(absl::StrCat(root, "/sys/bus/pci/devices/", pci,
                                            "/numa_node")),
                          &node) ||
        t.node_cpus.count(node) == 0) {
      node = t.node_cpus.begin()->first;
    }
    t.gpu_node.push_back(node);
    std::string uuid;
    for (absl::string_view line :
         absl::StrSplit(Read(absl::StrCat(root, "/proc/driver/nvidia/gpus/",
                                          bdf, "/information")),
                        '\n')) {
      if (absl::ConsumePrefix(&line, "GPU UUID:")) {
        uuid = std::string(absl::StripAsciiWhitespace(line));
      }
    }
    t.gpu_uuid.push_back(std::move(uuid));
  }
  return t;
}

NumaTopology NarrowToVisibleGpus(NumaTopology t,
                                 absl::string_view cuda_visible_devices) {
  std::vector<int> nodes;
  std::vector<std::string> uuids;
  for (absl::string_view id : absl::StrSplit(cuda_visible_devices, ',')) {
    id = absl::StripAsciiWhitespace(id);
    int gpu = -1;
    if (absl::StartsWith(id, "GPU-")) {
      int matches = 0;
      for (size_t i = 0; i < t.gpu_uuid.size(); ++i) {
        if (!absl::StartsWith(t.gpu_uuid[i], id)) continue;
        gpu = static_cast<int>(i);
        ++matches;
      }
      // An ambiguous prefix names no one GPU.
      if (matches != 1) gpu = -1;
    } else if (!absl::SimpleAtoi(id, &gpu)) {
      gpu = -1;
    }
    if (gpu < 0 || static_cast<size_t>(gpu) >= t.gpu_node.size()) break;
    nodes.push_back(t.gpu_node[static_cast<size_t>(gpu)]);
    uuids.push_back(static_cast<size_t>(gpu) < t.gpu_uuid.size()
                        ? t.gpu_uuid[static_cast<size_t>(gpu)]
                        : "");
  }
  t.gpu_node = std::move(nodes);
  t.gpu_uuid = std::move(uuids);
  return t;
}

NumaBinding BindingFor(NumaMode mode, int local_rank, int nproc,
                       const NumaTopology& t) {
  NumaBinding b;
  if (mode == NumaMode::kNone || t.node_cpus.empty()) return b;
  const int node = NodeOf(local_rank, t);
  const std::vector<int>& node_cpus = t.node_cpus.at(node);
  switch (mode) {
    case NumaMode::kNode:
      b.cpus = node_cpus;
      b.memory_nodes = {node};
      break;
    case NumaMode::kSocket: {
      const int socket = t.cpu_socket.at(node_cpus.front());
      for (const auto& [n, cpus] : t.node_cpus) {
        if (t.cpu_socket.at(cpus.front()) != socket) continue;
        b.cpus.insert(b.cpus.end(), cpus.begin(), cpus.end());
        b.memory_nodes.insert(n);
      }
      break;
    }
    case NumaMode::kExclusive: {
      // Disjoint, equal slices of the node's CPUs for the ranks on it.
      auto [index, count] = ShareOfNode(local_rank, nproc, t, node, NodeOf);
      const size_t per = std::max<size_t>(1, node_cpus.size() / count);
      const size_t begin = std::min(node_cpus.size() - 1, per * index);
      const size_t end = std::min(node_cpus.size(), begin + per);
      b.cpus.assign(node_cpus.begin() + begin, node_cpus.begin() + end);
      b.memory_nodes = {node};
      break;
    }
    case NumaMode::kCoreComplex: {
      // One L3 group (core complex) of the node per rank, round-robin.
      std::vector<int> groups;
      for (int cpu : node_cpus) {
        const int g = t.cpu_l3.at(cpu);
        if (std::find(groups.begin(), groups.end(), g) == groups.end()) {
          groups.push_back(g);
        }
      }
      auto [index, count] = ShareOfNode(local_rank, nproc, t, node, NodeOf);
      (void)count;
      const int group = groups[static_cast<size_t>(index) % groups.size()];
      for (int cpu : node_cpus) {
        if (t.cpu_l3.at(cpu) == group) b.cpus.push_back(cpu);
      }
      b.memory_nodes = {node};
      break;
    }
    case NumaMode::kNone:
      break;
  }
  return b;
}

int ApplyNumaBinding(const NumaBinding& binding) {
  if (!binding.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : binding.cpus) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
    if (sched_setaffinity(0, sizeof(set), &set) != 0) return errno;
  }
  if (!binding.memory_nodes.empty()) {
    // MPOL_BIND = 2 (linux/mempolicy.h); a 1024-node mask.
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {};
    for (int node : binding.memory_nodes) {
      if (node < 0 || node >= 1024) continue;
      mask[node / (8 * sizeof(unsigned long))] |=
          1UL << (node % (8 * sizeof(unsigned long)));
    }
    if (syscall(SYS_set_mempolicy, 2, mask, 1024UL) != 0) return errno;
  }
  return 0;
}

}  // namespace distjob
