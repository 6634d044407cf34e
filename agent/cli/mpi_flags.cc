#include "agent/cli/mpi_flags.h"

namespace distjob {

MpiRole ChooseMpiRole(bool framework_mpi, bool framework_auto,
                      const std::string& role, const EnvMap& env) {
  if (framework_mpi) {
    return role == "worker" ? MpiRole::kWorker : MpiRole::kLauncher;
  }
  if (!framework_auto) return MpiRole::kNone;
  const std::string operator_role =
      Lookup(env, kMpiJobRoleVariable).value_or("");
  if (operator_role == "worker") return MpiRole::kWorker;
  if (operator_role == "launcher") return MpiRole::kLauncher;
  return MpiRole::kNone;
}

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
