// `distjob-agent run --framework mpi --role worker`: a worker pod of an MPI
// job runs no command of its own; it serves the launcher's spawn requests
// (spawn/) in place of sshd, until the launcher says the job ended or its
// own stop signal comes.
#ifndef DISTJOB_AGENT_MPI_WORKER_H_
#define DISTJOB_AGENT_MPI_WORKER_H_

#include "agent/cli/options.h"
#include "agent/health.h"
#include "agent/report.h"
#include "common/environment.h"

namespace distjob {

// Serves spawns on --spawn-host:--spawn-port until the launcher's EndJob
// or a stop signal (already blocked, BlockAsyncSignalsAtStartup); Ready on
// --health-port only while it serves: on `health` when the run started its
// health server already (a role discovery decided), else on one of its
// own. The report's exit code: 2 when the port cannot be bound (or, should
// the flags have let it through, without a token or mutual TLS); the
// job's, as the launcher sent it; 128+N after stop signal N.
RunReport RunMpiWorker(const RunOptions& options, const EnvMap& env,
                       HealthServer* health = nullptr);

}  // namespace distjob

#endif  // DISTJOB_AGENT_MPI_WORKER_H_
