#include "agent/cli/mpi_flags.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "discovery/peers.h"

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

bool VolcanoMpiWorkersVisible(const MpiOptions& mpi,
                              const std::string& volcano_dir,
                              const EnvMap& env) {
  const std::string task = VolcanoEnvTask(mpi.worker_task);
  if (Lookup(env, absl::StrCat("VC_", task, "_HOSTS")) ||
      Lookup(env, absl::StrCat("VC_", task, "_NUM"))) {
    return true;
  }
  struct stat st;
  const std::string file =
      absl::StrCat(volcano_dir, "/", VolcanoHostFile(mpi.worker_task));
  return stat(file.c_str(), &st) == 0;
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
  flags->Add(AgentFlag(
      "mpi-master-task", "NAME",
      "Volcano MPI jobs: the task whose pods run mpirun (default "
      "mpimaster, as Volcano's MPI examples name it; the mpi plugin's "
      "--master when set). With --framework auto such a pod is the "
      "launcher.",
      SetString(&out->master_task)));
  flags->Add(AgentFlag(
      "mpi-worker-task", "NAME",
      "Volcano MPI jobs: the task whose pods serve mpirun's spawns "
      "(default mpiworker, as Volcano's MPI examples name it; the mpi "
      "plugin's --worker when set). With --framework auto such a pod is a "
      "worker; its hosts make the launcher's hostfile.",
      SetString(&out->worker_task)));
}

}  // namespace distjob
