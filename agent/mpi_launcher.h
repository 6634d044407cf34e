// `distjob-agent run --framework mpi -- mpirun ...`: the launcher pod of an
// MPI job. It points every supported MPI's remote launch at `distjob-agent
// rsh`, waits until the spawn server of every host mpirun will reach
// answers (the race a launcher loses against the workers' sshd), then runs
// mpirun and exits with its code.
#ifndef DISTJOB_AGENT_MPI_LAUNCHER_H_
#define DISTJOB_AGENT_MPI_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "common/environment.h"

namespace distjob {

// The name under which the binary runs as `rsh` (main.cc): Hydra and
// Intel MPI exec their launcher as one program, without arguments.
inline constexpr char kRshProgramName[] = "distjob-rsh";

// The hosts whose spawn servers the launcher waits for (from the command,
// the MPIs' variables or /etc/mpi/hostfile; localhost is mpirun's own).
// InvalidArgument naming the file when a named hostfile cannot be read.
absl::StatusOr<std::vector<std::string>> MpiHosts(
    const std::vector<std::string>& command, const EnvMap& env);

// Runs the launcher role; the stop signals are already blocked
// (BlockAsyncSignalsAtStartup). Exit 2 for a hostfile that cannot be read,
// 138 (retryable) when a spawn server is still missing after
// --spawn-wait, 128+N after stop signal N, else mpirun's own code.
int RunMpiLauncher(const RunOptions& options, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_MPI_LAUNCHER_H_
