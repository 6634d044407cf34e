// The agent-only options of `distjob-agent run` that shape supervision and
// reporting: restart policy, backoff, reporting files, health probes.
#ifndef DISTJOB_AGENT_CLI_SUPERVISOR_FLAGS_H_
#define DISTJOB_AGENT_CLI_SUPERVISOR_FLAGS_H_

#include "absl/status/status.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/options.h"
#include "common/environment.h"

namespace distjob {

// Registers the supervisor and reporting options (DISTJOB_<NAME> defaults).
void AddSupervisorFlags(FlagSet* flags, RunOptions* options);

// After the flags: the FileTimer's FIFO path, once. Without
// --file-timer-path (TORCHELASTIC_TIMER_FILE) it is watchdog_timer_<uuid>
// in $TMPDIR (else /tmp), as torchrun names it; InvalidArgument naming the
// flag when the path's directory does not exist.
absl::Status ResolveFileTimerPath(const EnvMap& env,
                                  SupervisorOptions* supervisor);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_SUPERVISOR_FLAGS_H_
