#include "supervisor/numa.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

void MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      mkdir(path.substr(0, i).c_str(), 0755);
    }
  }
}

void Write(const std::string& path, const std::string& text) {
  MakeDirs(path.substr(0, path.rfind('/')));
  std::ofstream(path) << text;
}

// Two sockets of one NUMA node each, 8 CPUs per node in two L3 groups of 4,
// and 8 GPUs: 0-3 on node 0, 4-7 on node 1 (listed in PCI order).
std::string FakeGpuNode() {
  const std::string root =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/numa-gpu");
  Write(root + "/sys/devices/system/node/node0/cpulist", "0-7\n");
  Write(root + "/sys/devices/system/node/node1/cpulist", "8-15\n");
  Write(root + "/sys/devices/system/node/possible", "0-1\n");
  for (int cpu = 0; cpu < 16; ++cpu) {
    const std::string dir =
        absl::StrCat(root, "/sys/devices/system/cpu/cpu", cpu);
    Write(dir + "/topology/physical_package_id", cpu < 8 ? "0\n" : "1\n");
    const int first = cpu / 4 * 4;
    Write(dir + "/cache/index3/shared_cpu_list",
          absl::StrCat(first, "-", first + 3, "\n"));
  }
  for (int gpu = 0; gpu < 8; ++gpu) {
    const std::string bdf = absl::StrCat("0000:", 10 + gpu, ":00.0");
    Write(root + "/proc/driver/nvidia/gpus/" + bdf + "/information",
          absl::StrCat("Model: \t\t Fake GPU\nGPU UUID: \t GPU-", gpu,
                       "aaaa-0000\nBus Location: \t ", bdf, "\n"));
    Write(root + "/sys/bus/pci/devices/" + bdf + "/numa_node",
          gpu < 4 ? "0\n" : "1\n");
  }
  return root;
}

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

TEST(NumaTest, ModesOnAGpuNode) {
  auto t = ReadNumaTopology(FakeGpuNode());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->gpu_node, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));

  NumaBinding node = BindingFor(NumaMode::kNode, 5, 8, *t);
  EXPECT_EQ(node.cpus, Range(8, 15));
  EXPECT_EQ(node.memory_nodes, (std::set<int>{1}));

  NumaBinding socket = BindingFor(NumaMode::kSocket, 1, 8, *t);
  EXPECT_EQ(socket.cpus, Range(0, 7));
  EXPECT_EQ(socket.memory_nodes, (std::set<int>{0}));

  // Four ranks share node 1's 8 CPUs: two each, disjoint.
  EXPECT_EQ(BindingFor(NumaMode::kExclusive, 4, 8, *t).cpus, Range(8, 9));
  EXPECT_EQ(BindingFor(NumaMode::kExclusive, 7, 8, *t).cpus, Range(14, 15));

  // Node 0 has two core complexes (0-3, 4-7): ranks alternate.
  EXPECT_EQ(BindingFor(NumaMode::kCoreComplex, 0, 8, *t).cpus, Range(0, 3));
  EXPECT_EQ(BindingFor(NumaMode::kCoreComplex, 1, 8, *t).cpus, Range(4, 7));
  EXPECT_EQ(BindingFor(NumaMode::kCoreComplex, 2, 8, *t).cpus, Range(0, 3));
}

TEST(NumaTest, LocalRanksUseTheVisibleGpus) {
  auto t = ReadNumaTopology(FakeGpuNode());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->gpu_uuid[5], "GPU-5aaaa-0000");

  // Local rank 0 runs on GPU 6 (node 1), rank 1 on GPU 2 (node 0).
  NumaTopology visible = NarrowToVisibleGpus(*t, "6, 2");
  EXPECT_EQ(visible.gpu_node, (std::vector<int>{1, 0}));
  EXPECT_EQ(BindingFor(NumaMode::kNode, 0, 2, visible).cpus, Range(8, 15));
  EXPECT_EQ(BindingFor(NumaMode::kNode, 1, 2, visible).cpus, Range(0, 7));
  // Two ranks on node 1's GPUs 4 and 7 split its CPUs between them.
  visible = NarrowToVisibleGpus(*t, "4,7");
  EXPECT_EQ(BindingFor(NumaMode::kExclusive, 1, 2, visible).cpus,
            Range(12, 15));

  // UUIDs, or a unique prefix of one.
  EXPECT_EQ(NarrowToVisibleGpus(*t, "GPU-5aaaa-0000,GPU-1").gpu_node,
            (std::vector<int>{1, 0}));
  // The list ends where an entry names no GPU here, as CUDA's does.
  EXPECT_EQ(NarrowToVisibleGpus(*t, "7,9,0").gpu_node, (std::vector<int>{1}));
  EXPECT_EQ(NarrowToVisibleGpus(*t, "GPU-,0").gpu_node, (std::vector<int>{}));
  // Three GPUs share the prefix GPU-1aaaa.
  t->gpu_uuid[2] = "GPU-1aaaa-0001";
  t->gpu_uuid[3] = "GPU-1aaaa-0002";
  EXPECT_EQ(NarrowToVisibleGpus(*t, "GPU-1aaaa,0").gpu_node,
            (std::vector<int>{}));
  EXPECT_EQ(NarrowToVisibleGpus(*t, "MIG-1234,0").gpu_node,
            (std::vector<int>{}));
  EXPECT_EQ(NarrowToVisibleGpus(*t, "").gpu_node, (std::vector<int>{}));
}

TEST(NumaTest, WithoutGpusRanksSpreadOverNodes) {
  auto t = ReadNumaTopology(FakeGpuNode());
  ASSERT_TRUE(t.ok());
  t->gpu_node.clear();
  EXPECT_EQ(BindingFor(NumaMode::kNode, 0, 2, *t).memory_nodes,
            (std::set<int>{0}));
  EXPECT_EQ(BindingFor(NumaMode::kNode, 1, 2, *t).memory_nodes,
            (std::set<int>{1}));
}

TEST(NumaTest, NoNumaInformation) {
  const std::string root =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/numa-none");
  MakeDirs(root);
  auto t = ReadNumaTopology(root);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

TEST(NumaTest, ParseModeAndLists) {
  EXPECT_EQ(*ParseNumaMode("core-complex"), NumaMode::kCoreComplex);
  auto bad = ParseNumaMode("nodes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "'nodes' is not one of node, socket, exclusive, core-complex");
  EXPECT_EQ(ParseCpuList("0-2,5"), (std::vector<int>{0, 1, 2, 5}));
}

TEST(NumaTest, ApplyToThisProcessKeepsItRunnable) {
  cpu_set_t current;
  ASSERT_EQ(sched_getaffinity(0, sizeof(current), &current), 0);
  int first = 0;
  while (!CPU_ISSET(first, &current)) ++first;
  NumaBinding b;
  b.cpus = {first};
  EXPECT_EQ(ApplyNumaBinding(b), 0);
  cpu_set_t now;
  ASSERT_EQ(sched_getaffinity(0, sizeof(now), &now), 0);
  EXPECT_EQ(CPU_COUNT(&now), 1);
  sched_setaffinity(0, sizeof(current), &current);
}

}  // namespace
}  // namespace distjob
