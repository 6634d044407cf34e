#include "agent/mpi_role.h"

#include "agent/mpi_launcher.h"
#include "agent/mpi_worker.h"
#include "common/logging.h"

namespace distjob {

int RunMpiRole(const RunOptions& options, const EnvMap& env, const MpiPlan& mpi,
               HealthServer* health) {
  const bool worker = mpi.role == MpiRole::kWorker;
  DJ_LOG_INFO("MPI {} ({})", worker ? "worker" : "launcher", mpi.role_source);
  if (worker) return RunMpiWorker(options, env, health);
  return RunMpiLauncher(options, env, mpi);
}

}  // namespace distjob
