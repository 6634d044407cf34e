#include "agent/mpi_role.h"

#include "agent/mpi_launcher.h"
#include "agent/mpi_worker.h"
#include "agent/report.h"
#include "common/logging.h"

namespace distjob {

RunReport RunMpiRole(const RunOptions& options, const EnvMap& env,
                     const MpiPlan& mpi, HealthServer* health) {
  const bool worker = mpi.role == MpiRole::kWorker;
  DJ_LOG_INFO("MPI {} ({})", worker ? "worker" : "launcher", mpi.role_source);
  // The launcher's end is the job's: its summary line and termination
  // message say why, naming a lost worker; a worker's repeat it.
  const RunReport report = worker ? RunMpiWorker(options, env, health)
                                  : RunMpiLauncher(options, env, mpi);
  PublishReport(report, options.outcome.termination_log, "");
  return report;
}

}  // namespace distjob
