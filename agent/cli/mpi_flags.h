// The options of MPI jobs (`run --framework mpi`, and `rsh`, which reads
// the same variables): where the workers' spawn servers listen and how
// long the launcher waits for them.
#ifndef DISTJOB_AGENT_CLI_MPI_FLAGS_H_
#define DISTJOB_AGENT_CLI_MPI_FLAGS_H_

#include <string>

#include "absl/time/time.h"
#include "agent/cli/flag_parser.h"
#include "common/environment.h"

namespace distjob {

// The spawn service's port when --spawn-port / DISTJOB_SPAWN_PORT is not
// given: the same on every pod of the job.
inline constexpr int kDefaultSpawnPort = 29522;

// This pod's part in an MPI job: none (not an MPI job), the launcher that
// runs mpirun, or a worker that serves its spawns.
enum class MpiRole { kNone, kLauncher, kWorker };

// The variable Kubeflow's MPI Operator (v2) sets on its pods: "launcher" or
// "worker".
inline constexpr char kMpiJobRoleVariable[] = "K_MPI_JOB_ROLE";

struct MpiOptions {
  // Decided once from --framework, --role and K_MPI_JOB_ROLE
  // (ChooseMpiRole), never from a flag of its own.
  MpiRole role = MpiRole::kNone;
  int spawn_port = kDefaultSpawnPort;
  // Where a worker's spawn server listens ("::": every address).
  std::string spawn_host = "::";
  // How long the launcher waits for every worker's spawn server.
  absl::Duration spawn_wait = absl::Minutes(10);
  // The task names of a Volcano MPI job, whose pods take the launcher and
  // worker roles with no flag (agent/mpi_plan.h): Volcano's MPI examples'
  // names. The mpi plugin's own defaults (--master=master,
  // --worker=worker) are a PyTorch job's task names too, so they count
  // only when given here.
  std::string master_task = "mpimaster";
  std::string worker_task = "mpiworker";
};

// --framework mpi: a worker with --role worker, else the launcher.
// --framework auto: K_MPI_JOB_ROLE's role ("launcher" or "worker") when the
// MPI Operator set it. Any other framework: none.
MpiRole ChooseMpiRole(bool framework_mpi, bool framework_auto,
                      const std::string& role, const EnvMap& env);

// Whether a Volcano MPI job's worker task shows in `volcano_dir` (its
// host file) or the environment (VC_<TASK>_HOSTS or _NUM): its pods may
// then run with no command of their own, before discovery says which task
// this pod is (agent/mpi_plan.h).
bool VolcanoMpiWorkersVisible(const MpiOptions& mpi,
                              const std::string& volcano_dir,
                              const EnvMap& env);

// Registers --spawn-port (DISTJOB_SPAWN_PORT), --spawn-host
// (DISTJOB_SPAWN_HOST), --spawn-wait (DISTJOB_SPAWN_WAIT),
// --mpi-master-task (DISTJOB_MPI_MASTER_TASK) and --mpi-worker-task
// (DISTJOB_MPI_WORKER_TASK).
void AddMpiFlags(FlagSet* flags, MpiOptions* out);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_MPI_FLAGS_H_
