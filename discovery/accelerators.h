// How many accelerators this pod can use, by vendor, as the frameworks count
// them: NVIDIA (the driver's /proc/driver/nvidia/gpus), AMD ROCm (the KFD
// topology's GPU nodes whose render node is in the pod's /dev/dri) and Intel
// (DRM render nodes of vendor 0x8086 in the pod's /dev/dri), each narrowed by
// the visible-devices variables its runtime honours. Used for torchrun's
// --nproc-per-node gpu/auto/xpu.
#ifndef DISTJOB_DISCOVERY_ACCELERATORS_H_
#define DISTJOB_DISCOVERY_ACCELERATORS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "common/environment.h"

namespace distjob {

struct AcceleratorCounts {
  int nvidia = 0;
  int amd = 0;
  int intel = 0;
  // What torch.cuda.device_count() sees: CUDA on NVIDIA, HIP on ROCm.
  int cuda() const { return nvidia + amd; }
};

// `root` is "/" on a real node; tests pass a faked tree holding proc/, sys/
// and dev/ below it.
AcceleratorCounts CountAccelerators(const std::string& root, const EnvMap& env);

// How many devices a visible-devices list leaves of `present`: unset keeps
// all, "" none; entries count up to the first invalid one ("-1"), as CUDA
// does. ZE_AFFINITY_MASK's "0.1" counts its device (0) once.
int NarrowByVisibleList(int present, absl::string_view list,
                        bool subdevices = false);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_ACCELERATORS_H_
