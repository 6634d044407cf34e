// The cgroup files supervisor/cgroup_oom reads: memory.events /
// memory.oom_control ("oom_kill N") and /proc/self/cgroup, whose paths it
// joins under the cgroup mount (here an empty scratch directory, so no
// candidate exists and nothing outside it is touched).
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input.h"
#include "supervisor/cgroup_oom.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* root =
      new std::string(distjob::ScratchDir("cgroup"));
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)distjob::ParseOomKillCount(text);
  (void)distjob::FindOomCounterFile(text, *root);
  return 0;
}
