// This pod's part in an MPI job and where it came from: the flags or
// Kubeflow's K_MPI_JOB_ROLE, decided when the options are parsed, or a
// Volcano MPI job's task names, known only once discovery has named this
// pod's task, or Kubeflow Trainer v2's MPI launcher (a JobSet pod of
// replicated job `launcher` given the operator's hostfile). Beside the
// role, the worker hosts discovery found, from which the launcher writes a
// hostfile when mpirun is given none. A value of its own: the parsed
// options are never rewritten.
#ifndef DISTJOB_AGENT_MPI_PLAN_H_
#define DISTJOB_AGENT_MPI_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "common/environment.h"
#include "discovery/job_env.h"

namespace distjob {

// The variable Volcano's mpi plugin (where the job enables it) sets on the
// master task's pods: the worker hosts, comma-separated; it stands in for
// VC_<TASK>_HOSTS, which large jobs may lack.
inline constexpr char kVolcanoMpiHostVariable[] = "MPI_HOST";

struct MpiPlan {
  MpiRole role = MpiRole::kNone;
  // Why: "flag --framework mpi", "env K_MPI_JOB_ROLE=worker", "Volcano
  // task mpimaster (hostname)"; empty for no role.
  std::string role_source;
  bool from_volcano_task = false;  // the role came from the pod's task
  // The workers' hosts as discovery found them (the launcher's hostfile
  // when none is named), and where from.
  std::vector<std::string> worker_hosts;
  std::string worker_hosts_source;
};

// The explicit role (options.mpi.role) wins; else, with --framework auto,
// a Volcano pod of task --mpi-master-task is the launcher and one of
// --mpi-worker-task a worker, and a Trainer v2 pod of replicated job
// `launcher` (--replicated-job, else its hostname <trainjob>-launcher-<job
// index>-<JOB_COMPLETION_INDEX>) with OMPI_MCA_orte_default_hostfile or
// /etc/mpi/hostfile is the launcher. The launcher's worker hosts: the worker
// task's in `job` (a Volcano host file or VC_<TASK>_HOSTS, or --peers),
// else Volcano's MPI_HOST. InvalidArgument (exit 2), one line naming what
// to set: a Volcano launcher with no worker hosts anywhere, a Volcano
// worker with neither the job's token nor mutual TLS, and a pod that is
// no worker and has no command.
absl::StatusOr<MpiPlan> PlanMpi(const RunOptions& options, const JobEnv& job,
                                const EnvMap& env);

// The plan of a role the options decided, which `run` follows before any
// discovery (such a pod waits for no peer's DNS name): PlanMpi over the
// peers of --peers or --peers-file alone, read without a DNS wait.
absl::StatusOr<MpiPlan> PlanExplicitMpi(const RunOptions& options,
                                        const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_MPI_PLAN_H_
