// `distjob-agent preflight`: the checks of agent/preflight.h from flags and
// the pod's environment (MASTER_ADDR, PET_RDZV_ENDPOINT, the peers the
// job's discovery sources name), for an init container.
#ifndef DISTJOB_AGENT_PREFLIGHT_COMMAND_H_
#define DISTJOB_AGENT_PREFLIGHT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/environment.h"

namespace distjob {

// Prints one line per check (or, with --json, one JSON document) and
// returns the KEP-3416 code: 0 pass, 10 warning, 20 retryable, 30 fatal;
// 2 for a command line that does not parse; 128+N when stopped by signal N.
int PreflightCommand(const std::vector<std::string>& args, const EnvMap& env);

// The names to resolve: `master_addr` (unless empty) and the peers from
// the sources discovery reads (discovery/peers.h): `peers_spec`, else
// `peers_file`, else Volcano's host files in `volcano_dir` and the VC_*
// variables; each once. InvalidArgument naming a source that does not
// parse.
absl::StatusOr<std::vector<std::string>> PreflightNames(
    const std::string& master_addr, const std::string& peers_spec,
    const std::string& peers_file, const std::string& volcano_dir,
    const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_PREFLIGHT_COMMAND_H_
