// The options current torchrun (PyTorch 2.x) added after 1.13, kept apart
// from agent/cli/run_flags.cc: console and file routing of worker lines, and
// the Python-only options the agent accepts with a notice.
#ifndef DISTJOB_AGENT_CLI_TORCHRUN_FLAGS_H_
#define DISTJOB_AGENT_CLI_TORCHRUN_FLAGS_H_

#include <string>
#include <vector>

#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"
#include "common/environment.h"
#include "supervisor/line_policy.h"
#include "supervisor/numa.h"

namespace distjob {

// Registers --log-line-prefix-template, --duplicate-stdout-filters,
// --duplicate-stderr-filters, --virtual-local-rank, --numa-binding,
// --print-completion and --logs-specs into `options->launch`.
void AddCurrentTorchrunFlags(FlagSet* flags, RunOptions* options);

// The line routing of one worker's tee'd streams: its console prefix (the
// template, or torchrun's "[<role><local_rank>]:"), whether it reaches the
// console (--local-ranks-filter) and the duplicate filters. `rank` is the
// worker's global rank; `stream` is 1 (stdout) or 2 (stderr).
LinePolicy MakeLinePolicy(const LaunchOptions& launch, int local_rank, int rank,
                          int stream);

// Each local rank's --numa-binding, from the topology under `root` ("" on
// a real node) and the agent's CUDA_VISIBLE_DEVICES in `env` (local rank n
// uses the GPU it lists n-th); unbound (with a warning) where there is no
// NUMA information.
std::vector<NumaBinding> PlanNumaBindings(const LaunchOptions& launch,
                                          const EnvMap& env,
                                          const std::string& root = "");

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_TORCHRUN_FLAGS_H_
