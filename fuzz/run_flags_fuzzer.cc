// `distjob-agent run`'s command line and environment (torchrun's flags with
// their PET_* defaults, the agent's own with DISTJOB_*), as
// agent/cli/run_flags parses them: '\0'-separated argv elements, then an empty
// field, then KEY=VALUE environment entries.
#include <cstdint>
#include <string>
#include <vector>

#include "agent/cli/run_flags.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> fields = distjob::SplitFields(data, size, 256);
  std::vector<std::string> args;
  size_t i = 0;
  for (; i < fields.size() && !fields[i].empty(); ++i)
    args.push_back(fields[i]);
  const distjob::EnvMap env = distjob::FieldsToEnv(fields, i + 1);
  (void)distjob::ParseRunOptions(args, env);
  return 0;
}
