// The options of `distjob-agent run` (and `env`): torchrun's, under both
// spellings and with PET_* defaults, plus the agent's own (DISTJOB_*).
#ifndef DISTJOB_AGENT_CLI_RUN_FLAGS_H_
#define DISTJOB_AGENT_CLI_RUN_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"
#include "common/environment.h"

namespace distjob {

// Registers torchrun's options, writing into `options->launch`.
void AddTorchrunFlags(FlagSet* flags, RunOptions* options);

// What the program knows of a run before its flags: the name it was
// invoked by, and what an outer agent handed over (agent/outer_agent).
struct Invocation {
  bool as_torchrun = false;
  std::string rdzv_key_suffix;
};

// Parses `args` (after the subcommand) and `env` into options, then checks
// the combination and resolves derived values (min/max nodes, nproc);
// `invocation` goes into the options as they are made, so that nothing
// sets a field after parsing.
// InvalidArgument names the flag or variable and the accepted forms.
absl::StatusOr<RunOptions> ParseRunOptions(const std::vector<std::string>& args,
                                           const EnvMap& env,
                                           const Invocation& invocation = {});

std::string RunHelp();

// --rdzv-id's longest accepted value: with two host names (253 bytes each)
// it keeps every rendezvous key far below the store's 4096-byte limit.
inline constexpr size_t kMaxRdzvIdBytes = 256;

// --role's longest accepted value (printable ASCII, no spaces).
inline constexpr size_t kMaxRoleBytes = 63;

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
absl::Status ParseNnodes(absl::string_view value, int* min_nodes,
                         int* max_nodes);

// An integer >= 1, "cpu" (CPU count), "gpu" or "cuda" (visible NVIDIA or
// AMD GPUs; an error when there are none), "xpu" (visible Intel GPUs) or
// "auto" (GPUs if any, else CPUs), as torchrun. `root` holds the proc/, sys/
// and dev/ trees (discovery/accelerators.h); "/" on a node.
absl::StatusOr<int> ResolveNprocPerNode(absl::string_view value,
                                        const EnvMap& env,
                                        const std::string& root);
absl::StatusOr<int> ResolveNprocPerNode(absl::string_view value,
                                        const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_RUN_FLAGS_H_
