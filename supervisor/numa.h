// torchrun's --numa-binding: each local rank's CPU affinity and memory
// policy, from the sysfs topology and, on GPU nodes, the NUMA node of the
// rank's GPU (local rank n uses the n-th GPU CUDA_VISIBLE_DEVICES lists, or
// GPU n without it, as CUDA numbers them for torchrun). Applied in the
// worker between fork and exec with raw syscalls (sched_setaffinity,
// set_mempolicy), so no libnuma.
#ifndef DISTJOB_SUPERVISOR_NUMA_H_
#define DISTJOB_SUPERVISOR_NUMA_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

enum class NumaMode { kNone, kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive" or "core-complex"; InvalidArgument naming
// the accepted values otherwise.
absl::StatusOr<NumaMode> ParseNumaMode(absl::string_view value);

struct NumaTopology {
  // NUMA node -> its CPUs.
  std::map<int, std::vector<int>> node_cpus;
  // CPU -> socket (physical_package_id) and L3 group (its first CPU).
  std::map<int, int> cpu_socket;
  std::map<int, int> cpu_l3;
  // GPU index (PCI order of /proc/driver/nvidia/gpus) -> NUMA node.
  std::vector<int> gpu_node;
  // The same GPUs' UUIDs ("GPU-..."), "" where the driver does not say.
  std::vector<std::string> gpu_uuid;
};

// Reads `root`/sys/devices/system/{node,cpu} and the GPUs' PCI numa_node.
// NotFound when there is no NUMA information (no node directories).
absl::StatusOr<NumaTopology> ReadNumaTopology(const std::string& root);

// `t` with gpu_node narrowed to the GPUs `cuda_visible_devices` lists, in
// its order: CUDA numbers the visible GPUs from 0, so a worker's GPU n is
// the list's n-th entry. Entries are indexes into gpu_node or UUIDs (a
// unique prefix, as CUDA takes); the list ends at the first entry naming
// no GPU here (CUDA ignores the rest too), a MIG instance included.
NumaTopology NarrowToVisibleGpus(NumaTopology t,
                                 absl::string_view cuda_visible_devices);

struct NumaBinding {
  std::vector<int> cpus;
  std::set<int> memory_nodes;
};

// The binding of `local_rank` of `nproc`.
NumaBinding BindingFor(NumaMode mode, int local_rank, int nproc,
                       const NumaTopology& topology);

// Applies `binding` to the calling process; only raw syscalls, so safe
// between fork and exec. Returns 0 or an errno.
int ApplyNumaBinding(const NumaBinding& binding);

// "0-3,8" as the kernel writes CPU and node lists.
std::vector<int> ParseCpuList(absl::string_view list);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_NUMA_H_
