#include "agent/mpi_plan.h"

#include <sys/stat.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net.h"
#include "launchers/mpi_env.h"

namespace distjob {
namespace {

std::string ExplicitRoleSource(const RunOptions& options) {
  if (options.discovery.framework == Framework::kMpi) {
    return options.mpi.role == MpiRole::kWorker
               ? "flags --framework mpi --role worker"
               : "flag --framework mpi";
  }
  return absl::StrCat(
      "env ", kMpiJobRoleVariable, "=",
      options.mpi.role == MpiRole::kWorker ? "worker" : "launcher",
      " (Kubeflow MPIJob v2)");
}

// A Volcano MPI job's role for this pod, from its task: none unless the
// flags left the framework to discovery.
MpiPlan VolcanoRole(const RunOptions& options, const JobEnv& job) {
  MpiPlan plan;
  if (options.discovery.framework != Framework::kAuto || !job.has_identity ||
      job.cluster.source != PeerSource::kVolcano) {
    return plan;
  }
  const std::string& task = job.identity.id.task;
  if (task == options.mpi.master_task) {
    plan.role = MpiRole::kLauncher;
  } else if (task == options.mpi.worker_task) {
    plan.role = MpiRole::kWorker;
  } else {
    return plan;
  }
  std::string how = "the pod's task";
  if (auto it = job.identity.sources.find("task");
      it != job.identity.sources.end()) {
    how = it->second;
  }
  plan.role_source = absl::StrCat("Volcano task ", task, " (", how, ")");
  plan.from_volcano_task = true;
  return plan;
}

// The replicated job of a JobSet pod named <jobset>-<rjob>-<job index>-<pod
// index> whose pod index is JOB_COMPLETION_INDEX (a Job's pod always has
// it; without it nothing here is a JobSet pod, flag or not):
// --replicated-job when given, else `rjob` when the hostname ends so.
// Empty otherwise.
std::string ReplicatedJobNamed(const RunOptions& options, const EnvMap& env,
                               const std::string& rjob, std::string* how) {
  const std::string index = Lookup(env, "JOB_COMPLETION_INDEX").value_or("");
  if (index.empty()) return "";
  if (!options.discovery.replicated_job.empty()) {
    *how = "flag --replicated-job";
    return options.discovery.replicated_job;
  }
  std::string host = options.discovery.hostname.empty()
                         ? LocalHostname()
                         : options.discovery.hostname;
  host = host.substr(0, host.find('.'));
  std::vector<std::string> parts = absl::StrSplit(host, '-');
  int job_index = 0;
  if (parts.size() < 4 || parts[parts.size() - 3] != rjob ||
      parts.back() != index ||
      !absl::SimpleAtoi(parts[parts.size() - 2], &job_index)) {
    return "";
  }
  *how = absl::StrCat("hostname '", host, "'");
  return rjob;
}

// Kubeflow Trainer v2's MPI plugin marks only its launcher: the JobSet's
// `launcher` replicated job mounts the <trainjob>-mpi-hostfile ConfigMap
// at /etc/mpi/hostfile and gets OMPI_MCA_orte_default_hostfile naming it.
// Its `node` pods get nothing an MPI node alone has (no variable, no
// hostfile): they take the worker role from flags (docs/mpi.md).
MpiPlan TrainerV2Role(const RunOptions& options, const EnvMap& env) {
  MpiPlan plan;
  if (options.discovery.framework != Framework::kAuto) return plan;
  std::string hostfile;
  struct stat st;
  if (Lookup(env, "OMPI_MCA_orte_default_hostfile")) {
    hostfile = "env OMPI_MCA_orte_default_hostfile";
  } else if (stat(kOperatorHostfile, &st) == 0) {
    hostfile = kOperatorHostfile;
  } else {
    return plan;
  }
  std::string how;
  if (ReplicatedJobNamed(options, env, "launcher", &how) != "launcher") {
    return plan;
  }
  plan.role = MpiRole::kLauncher;
  plan.role_source =
      absl::StrCat("Trainer v2 MPI launcher (replicated job launcher: ", how,
                   "; hostfile: ", hostfile, ")");
  return plan;
}

// The worker hosts the launcher reaches when mpirun names none: the
// worker task's, else (Volcano's master) MPI_HOST. Empty when neither.
void FindWorkerHosts(const RunOptions& options, const JobEnv& job,
                     const EnvMap& env, MpiPlan* plan) {
  for (const std::string& task :
       {options.mpi.worker_task, std::string("worker")}) {
    if (const TaskPeers* peers = job.cluster.Find(task)) {
      plan->worker_hosts = peers->hosts;
      plan->worker_hosts_source =
          absl::StrCat("task ", task, ": ", peers->origin);
      return;
    }
  }
  const std::string listed = Lookup(env, kVolcanoMpiHostVariable).value_or("");
  for (absl::string_view host : absl::StrSplit(listed, ',')) {
    if (!host.empty()) plan->worker_hosts.emplace_back(host);
  }
  if (!plan->worker_hosts.empty()) {
    plan->worker_hosts_source = absl::StrCat("env ", kVolcanoMpiHostVariable);
  }
}

absl::Status CheckVolcanoPlan(const RunOptions& options, const MpiPlan& plan) {
  if (!plan.from_volcano_task) return absl::OkStatus();
  if (plan.role == MpiRole::kWorker && options.security.token.empty() &&
      options.security.ca_pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.role_source,
        " makes this pod an MPI worker, which serves commands to its "
        "callers: give the job's token (--rdzv-token-file or "
        "DISTJOB_RDZV_TOKEN) or mutual TLS (--rdzv-tls-cert, --rdzv-tls-key "
        "and --rdzv-tls-ca)"));
  }
  if (plan.role == MpiRole::kLauncher && plan.worker_hosts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(plan.role_source,
                     " makes this pod the MPI launcher, but no worker "
                     "hosts are named: none in ",
                     options.discovery.volcano_dir, "/",
                     VolcanoHostFile(options.mpi.worker_task), ", VC_",
                     VolcanoEnvTask(options.mpi.worker_task), "_HOSTS or ",
                     kVolcanoMpiHostVariable, " (is --mpi-worker-task ",
                     options.mpi.worker_task, " the job's worker task?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MpiPlan> PlanMpi(const RunOptions& options, const JobEnv& job,
                                const EnvMap& env) {
  MpiPlan plan;
  if (options.mpi.role != MpiRole::kNone) {
    plan.role = options.mpi.role;
    plan.role_source = ExplicitRoleSource(options);
  } else {
    plan = VolcanoRole(options, job);
    if (plan.role == MpiRole::kNone) plan = TrainerV2Role(options, env);
  }
  if (plan.role == MpiRole::kLauncher)
    FindWorkerHosts(options, job, env, &plan);
  if (absl::Status s = CheckVolcanoPlan(options, plan); !s.ok()) return s;
  if (plan.role != MpiRole::kWorker && options.command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no command to run", plan.role_source.empty() ? "" : " (",
        plan.role_source, plan.role_source.empty() ? "" : ")",
        "; usage: distjob-agent run [options] [--] COMMAND [ARGS...]"));
  }
  return plan;
}

absl::StatusOr<MpiPlan> PlanExplicitMpi(const RunOptions& options,
                                        const EnvMap& env) {
  JobEnv job;
  const DiscoveryOptions& d = options.discovery;
  if (!d.peers.empty() || !d.peers_file.empty()) {
    auto cluster = !d.peers.empty() ? ParseStaticPeers(d.peers, "flag --peers")
                                    : ReadPeersFile(d.peers_file);
    if (!cluster.ok()) return cluster.status();
    job.cluster = *std::move(cluster);
  }
  return PlanMpi(options, job, env);
}

}  // namespace distjob
