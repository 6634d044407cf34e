// An MPI job's pod runs its role in place of the agent's rounds: the
// launcher runs mpirun (agent/mpi_launcher.h), a worker serves its spawns
// (agent/mpi_worker.h). Both `run`'s paths come here: a role the flags or
// K_MPI_JOB_ROLE gave, before discovery (main.cc), and a Volcano job's,
// once discovery named the pod's task (agent/agent_loop.cc).
#ifndef DISTJOB_AGENT_MPI_ROLE_H_
#define DISTJOB_AGENT_MPI_ROLE_H_

#include "agent/cli/options.h"
#include "agent/health.h"
#include "agent/mpi_plan.h"
#include "agent/report.h"
#include "common/environment.h"

namespace distjob {

// Runs `mpi`'s role (not kNone), publishes its report (the summary line,
// the termination message) and returns it. `health`: the run's health
// server when it started one already, else nullptr (a worker then starts
// its own on --health-port).
RunReport RunMpiRole(const RunOptions& options, const EnvMap& env,
                     const MpiPlan& mpi, HealthServer* health);

}  // namespace distjob

#endif  // DISTJOB_AGENT_MPI_ROLE_H_
