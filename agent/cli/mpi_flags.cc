#include "agent/cli/mpi_flags.h"

namespace distjob {

void AddMpiFlags(FlagSet* flags, MpiOptions* out) {
  flags->Add(AgentFlag(
      "spawn-port", "PORT",
      "MPI jobs: the port of the workers' spawn servers, which run the "
      "commands mpirun starts through `distjob-agent rsh` (default 29522; "
      "the same on every pod).",
      SetInt(&out->spawn_port, 1, 65535)));
  flags->Add(AgentFlag("spawn-host", "ADDRESS",
                       "MPI workers: the address the spawn server listens "
                       "on (default ::, every address).",
                       SetHostName(&out->spawn_host)));
  flags->Add(AgentFlag(
      "spawn-wait", "DURATION",
      "MPI launcher: how long to wait for every worker's spawn server "
      "before giving up, naming the missing ones (default 10m).",
      SetDuration(&out->spawn_wait)));
}

}  // namespace distjob
