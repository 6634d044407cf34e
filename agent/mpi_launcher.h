// `distjob-agent run --framework mpi -- mpirun ...`: the launcher pod of an
// MPI job. It points every supported MPI's remote launch at `distjob-agent
// rsh`, waits until the spawn server of every host mpirun will reach
// answers (the race a launcher loses against the workers' sshd), then runs
// mpirun and exits with its code.
#ifndef DISTJOB_AGENT_MPI_LAUNCHER_H_
#define DISTJOB_AGENT_MPI_LAUNCHER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "agent/mpi_plan.h"
#include "agent/report.h"
#include "common/environment.h"

namespace distjob {

// The name under which the binary runs as `rsh` (main.cc): Hydra and
// Intel MPI exec their launcher as one program, without arguments.
inline constexpr char kRshProgramName[] = "distjob-rsh";
// The name of the link first on mpirun's PATH, so that a launcher that
// runs `ssh HOST COMMAND` itself (horovodrun's host checks, pdsh under
// DeepSpeed) reaches the workers' spawn servers too: the binary run under
// it is `rsh`.
inline constexpr char kSshShimName[] = "ssh";

// The hosts whose spawn servers the launcher waits for (localhost is
// mpirun's own), and where they were named.
struct MpiLaunchHosts {
  std::vector<std::string> hosts;
  std::string origin;
  // Nothing named any (no option of the command, no MPI variable, no
  // /etc/mpi/hostfile): the plan's worker hosts stand in, and the launcher
  // writes them as mpirun's hostfile.
  bool from_peers = false;
};

// From the command, the MPIs' variables or /etc/mpi/hostfile, else the
// plan's worker hosts. InvalidArgument naming the file when a named
// hostfile cannot be read.
absl::StatusOr<MpiLaunchHosts> MpiHosts(const std::vector<std::string>& command,
                                        const EnvMap& env, const MpiPlan& plan);

// What the launcher sets for mpirun, for `env`: each variable's value
// and why (`sources`); those whose value is a path made only at launch
// (the rsh link, the written hostfiles) are in `undecided`, with why.
struct MpirunEnv {
  EnvMap env;
  std::map<std::string, std::string> sources;
  std::map<std::string, std::string> undecided;
};
MpirunEnv PlanMpirunEnv(const RunOptions& options, const EnvMap& env,
                        const MpiLaunchHosts& hosts);

// Runs the launcher role; the stop signals are already blocked
// (BlockAsyncSignalsAtStartup). When mpirun is given no hostfile, writes
// one from `plan`'s worker hosts into the launcher's private directory
// and names it to mpirun through each MPI's variable (MpiHostfileEnv),
// never by changing the command. The report's exit code: 2 for a hostfile
// that cannot be read, 138 (retryable) when a spawn server is still
// missing after --spawn-wait, 128+N after stop signal N, 138 when mpirun
// failed and a worker was lost meanwhile (its rsh call broke, or its spawn
// server no longer answers: mpi_lost_hosts.h; the detail names the hosts),
// else mpirun's own code.
RunReport RunMpiLauncher(const RunOptions& options, const EnvMap& env,
                         const MpiPlan& plan);

}  // namespace distjob

#endif  // DISTJOB_AGENT_MPI_LAUNCHER_H_
