// The options of MPI jobs (`run --framework mpi`, and `rsh`, which reads
// the same variables): where the workers' spawn servers listen and how
// long the launcher waits for them.
#ifndef DISTJOB_AGENT_CLI_MPI_FLAGS_H_
#define DISTJOB_AGENT_CLI_MPI_FLAGS_H_

#include <string>

#include "absl/time/time.h"
#include "agent/cli/flag_parser.h"

namespace distjob {

// The spawn service's port when --spawn-port / DISTJOB_SPAWN_PORT is not
// given: the same on every pod of the job.
inline constexpr int kDefaultSpawnPort = 29522;

struct MpiOptions {
  int spawn_port = kDefaultSpawnPort;
  // Where a worker's spawn server listens ("::": every address).
  std::string spawn_host = "::";
  // How long the launcher waits for every worker's spawn server.
  absl::Duration spawn_wait = absl::Minutes(10);
};

// Registers --spawn-port (DISTJOB_SPAWN_PORT), --spawn-host
// (DISTJOB_SPAWN_HOST) and --spawn-wait (DISTJOB_SPAWN_WAIT).
void AddMpiFlags(FlagSet* flags, MpiOptions* out);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_MPI_FLAGS_H_
