#include "discovery/accelerators.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

void MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/')
      mkdir(path.substr(0, i).c_str(), 0755);
  }
}

void Write(const std::string& path, const std::string& text) {
  MakeDirs(path.substr(0, path.rfind('/')));
  std::ofstream(path) << text;
}

std::string FreshRoot(const std::string& name) {
  const std::string root = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  MakeDirs(root);
  return root;
}

TEST(AcceleratorsTest, NvidiaNarrowedByCudaVisibleDevices) {
  const std::string root = FreshRoot("nvidia");
  for (int i = 0; i < 8; ++i) {
    MakeDirs(absl::StrCat(root, "/proc/driver/nvidia/gpus/0000:", i, "0:00.0"));
  }
  EXPECT_EQ(CountAccelerators(root, {}).nvidia, 8);
  EXPECT_EQ(CountAccelerators(root, {}).cuda(), 8);
  EXPECT_EQ(CountAccelerators(root, {{"CUDA_VISIBLE_DEVICES", "1,3"}}).nvidia,
            2);
  EXPECT_EQ(CountAccelerators(root, {{"CUDA_VISIBLE_DEVICES", ""}}).nvidia, 0);
  EXPECT_EQ(
      CountAccelerators(root, {{"CUDA_VISIBLE_DEVICES", "0,-1,2"}}).nvidia, 1);
}

// KFD lists the CPU (no SIMDs) and 4 GPUs; the pod was given 3 render nodes.
TEST(AcceleratorsTest, AmdCountsGpuNodesWhoseRenderNodeThePodHas) {
  const std::string root = FreshRoot("amd");
  const std::string nodes = root + "/sys/class/kfd/kfd/topology/nodes/";
  Write(nodes + "0/properties", "cpu_cores_count 64\nsimd_count 0\n");
  for (int i = 1; i <= 4; ++i) {
    Write(absl::StrCat(nodes, i, "/properties"),
          absl::StrCat("simd_count 304\ndrm_render_minor ", 127 + i, "\n"));
    if (i <= 3) Write(absl::StrCat(root, "/dev/dri/renderD", 127 + i), "");
  }
  const AcceleratorCounts all = CountAccelerators(root, {});
  EXPECT_EQ(all.amd, 3);
  EXPECT_EQ(all.nvidia, 0);
  EXPECT_EQ(all.cuda(), 3);
  EXPECT_EQ(CountAccelerators(root, {{"HIP_VISIBLE_DEVICES", "0"}}).amd, 1);
  EXPECT_EQ(CountAccelerators(root, {{"ROCR_VISIBLE_DEVICES", "0,1"}}).amd, 2);
}

TEST(AcceleratorsTest, IntelCountsItsRenderNodes) {
  const std::string root = FreshRoot("intel");
  for (int i = 0; i < 4; ++i) {
    const std::string name = absl::StrCat("renderD", 128 + i);
    // One render node is another vendor's (a BMC's display).
    Write(root + "/sys/class/drm/" + name + "/device/vendor",
          i == 3 ? "0x1a03\n" : "0x8086\n");
    Write(root + "/dev/dri/" + name, "");
  }
  Write(root + "/sys/class/drm/card0/device/vendor", "0x8086\n");
  EXPECT_EQ(CountAccelerators(root, {}).intel, 3);
  EXPECT_EQ(CountAccelerators(root, {}).cuda(), 0);
  EXPECT_EQ(CountAccelerators(root, {{"ZE_AFFINITY_MASK", "0.0,0.1,2"}}).intel,
            2);
  EXPECT_EQ(CountAccelerators(root, {{"ZE_AFFINITY_MASK", ""}}).intel, 3);
}

TEST(AcceleratorsTest, NothingOnACpuNode) {
  const AcceleratorCounts none = CountAccelerators(FreshRoot("cpu"), {});
  EXPECT_EQ(none.cuda() + none.intel, 0);
}

}  // namespace
}  // namespace distjob
