#include "agent/mpi_plan.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using Hosts = std::vector<std::string>;

// A Volcano MPI job's pod of task `task`, its peers from the svc plugin's
// files (or, without `worker_file`, without the worker task's list).
JobEnv VolcanoPod(const std::string& task, bool worker_file = true) {
  JobEnv job;
  job.has_identity = true;
  job.identity.id = {"j", task, 0};
  job.identity.sources["task"] = "hostname";
  job.cluster.source = PeerSource::kVolcano;
  job.cluster.tasks.push_back({"mpimaster",
                               {"j-mpimaster-0.j"},
                               "volcano file /etc/volcano/mpimaster.host"});
  if (worker_file) {
    job.cluster.tasks.push_back({"mpiworker",
                                 {"j-mpiworker-0.j", "j-mpiworker-1.j"},
                                 "volcano file /etc/volcano/mpiworker.host"});
  }
  return job;
}

RunOptions Auto(std::vector<std::string> command = {"mpirun", "prog"}) {
  RunOptions options;
  options.command = std::move(command);
  options.security.token = "t";
  return options;
}

TEST(MpiPlanTest, VolcanosMasterTaskIsTheLauncherWithTheWorkersHosts) {
  auto plan = PlanMpi(Auto(), VolcanoPod("mpimaster"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->role, MpiRole::kLauncher);
  EXPECT_EQ(plan->role_source, "Volcano task mpimaster (hostname)");
  EXPECT_EQ(plan->worker_hosts, (Hosts{"j-mpiworker-0.j", "j-mpiworker-1.j"}));
  EXPECT_EQ(plan->worker_hosts_source,
            "task mpiworker: volcano file /etc/volcano/mpiworker.host");
}

TEST(MpiPlanTest, VolcanosWorkerTaskServesSpawnsWithNoCommand) {
  auto plan = PlanMpi(Auto({}), VolcanoPod("mpiworker"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->role, MpiRole::kWorker);
  EXPECT_EQ(plan->role_source, "Volcano task mpiworker (hostname)");
  EXPECT_TRUE(plan->worker_hosts.empty());
}

TEST(MpiPlanTest, TheMastersMpiHostStandsInForAMissingWorkerList) {
  auto plan = PlanMpi(Auto(), VolcanoPod("mpimaster", false),
                      {{"MPI_HOST", "j-mpiworker-0.j,j-mpiworker-1.j"}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->worker_hosts, (Hosts{"j-mpiworker-0.j", "j-mpiworker-1.j"}));
  EXPECT_EQ(plan->worker_hosts_source, "env MPI_HOST");
}

TEST(MpiPlanTest, ALauncherWithNoWorkerHostsAnywhereNamesWhereToLook) {
  auto plan = PlanMpi(Auto(), VolcanoPod("mpimaster", false), {});
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(plan.status().message());
  EXPECT_NE(m.find("/etc/volcano/mpiworker.host"), std::string::npos) << m;
  EXPECT_NE(m.find("VC_MPIWORKER_HOSTS"), std::string::npos) << m;
  EXPECT_NE(m.find("MPI_HOST"), std::string::npos) << m;
}

TEST(MpiPlanTest, AVolcanoWorkerNeedsTheTokenOrMutualTls) {
  RunOptions options = Auto({});
  options.security.token.clear();
  auto plan = PlanMpi(options, VolcanoPod("mpiworker"), {});
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("--rdzv-token-file"),
            std::string::npos);
  options.security.ca_pem = "pem";
  EXPECT_TRUE(PlanMpi(options, VolcanoPod("mpiworker"), {}).ok());
}

TEST(MpiPlanTest, TaskNamesAreConfigurable) {
  RunOptions options = Auto();
  options.mpi.master_task = "launcher";
  options.mpi.worker_task = "mpimaster";
  auto plan = PlanMpi(options, VolcanoPod("mpimaster"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->role, MpiRole::kWorker);
}

TEST(MpiPlanTest, ExplicitRolesWinAndOtherTasksOrFrameworksGetNone) {
  RunOptions options = Auto();
  options.mpi.role = MpiRole::kWorker;
  options.discovery.framework = Framework::kMpi;
  auto plan = PlanMpi(options, VolcanoPod("mpimaster"), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->role, MpiRole::kWorker);
  EXPECT_EQ(plan->role_source, "flags --framework mpi --role worker");

  options = Auto();
  options.mpi.role = MpiRole::kLauncher;
  plan = PlanMpi(options, JobEnv(), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->role_source,
            "env K_MPI_JOB_ROLE=launcher (Kubeflow MPIJob v2)");
  // No Volcano worker list: nothing to check (behaviour as before).
  EXPECT_TRUE(plan->worker_hosts.empty());

  options = Auto();
  options.discovery.framework = Framework::kPyTorch;
  EXPECT_EQ(PlanMpi(options, VolcanoPod("mpimaster"), {})->role,
            MpiRole::kNone);
  EXPECT_EQ(PlanMpi(Auto(), VolcanoPod("ps"), {})->role, MpiRole::kNone);
  JobEnv peers = VolcanoPod("mpimaster");
  peers.cluster.source = PeerSource::kStatic;
  EXPECT_EQ(PlanMpi(Auto(), peers, {})->role, MpiRole::kNone);
}

TEST(MpiPlanTest, ANonWorkerWithNoCommandIsRefused) {
  auto plan = PlanMpi(Auto({}), VolcanoPod("mpimaster"), {});
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("no command to run"),
            std::string::npos);
  EXPECT_FALSE(PlanMpi(Auto({}), VolcanoPod("ps"), {}).ok());
}

TEST(MpiPlanTest, ExplicitLaunchersTakeTheWorkersOfPeers) {
  RunOptions options = Auto();
  options.mpi.role = MpiRole::kLauncher;
  options.discovery.framework = Framework::kMpi;
  options.discovery.peers = "worker=w0,w1";
  auto plan = PlanExplicitMpi(options, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->worker_hosts, (Hosts{"w0", "w1"}));
  EXPECT_EQ(plan->worker_hosts_source, "task worker: flag --peers");
  options.discovery.peers = "worker=";
  EXPECT_FALSE(PlanExplicitMpi(options, {}).ok());
}

// A pod of Kubeflow Trainer v2's MPI runtime: replicated job `rjob`'s pod
// `index` of TrainJob tj (a JobSet pod, JOB_COMPLETION_INDEX its index).
RunOptions TrainerPod(const std::string& rjob, int index = 0) {
  RunOptions options = Auto();
  options.discovery.hostname = absl::StrCat("tj-", rjob, "-0-", index);
  return options;
}

EnvMap TrainerEnv(int index, bool hostfile_variable) {
  EnvMap env = {{"JOB_COMPLETION_INDEX", absl::StrCat(index)}};
  if (hostfile_variable) {
    env["OMPI_MCA_orte_default_hostfile"] = "/etc/mpi/hostfile";
  }
  return env;
}

TEST(MpiPlanTest, TrainerV2sLauncherIsKnownByItsJobAndHostfile) {
  auto plan = PlanMpi(TrainerPod("launcher"), JobEnv(), TrainerEnv(0, true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->role, MpiRole::kLauncher);
  EXPECT_EQ(plan->role_source,
            "Trainer v2 MPI launcher (replicated job launcher: hostname "
            "'tj-launcher-0-0'; hostfile: env OMPI_MCA_orte_default_hostfile)");
  // --replicated-job names the job where the hostname does not.
  RunOptions options = TrainerPod("x");
  options.discovery.replicated_job = "launcher";
  plan = PlanMpi(options, JobEnv(), TrainerEnv(0, true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->role, MpiRole::kLauncher);
  EXPECT_NE(plan->role_source.find("flag --replicated-job"), std::string::npos)
      << plan->role_source;
}

TEST(MpiPlanTest, TrainerV2sOtherPodsAreNoMpiRoleWithoutFlags) {
  // A node pod: the plugin gives it no variable and no hostfile.
  EXPECT_EQ(
      PlanMpi(TrainerPod("node", 1), JobEnv(), TrainerEnv(1, false))->role,
      MpiRole::kNone);
  // Nor is a node pod with the variable (the launcher's only), a launcher
  // whose index is not its hostname's, or one given another framework.
  EXPECT_EQ(PlanMpi(TrainerPod("node", 1), JobEnv(), TrainerEnv(1, true))->role,
            MpiRole::kNone);
  EXPECT_EQ(
      PlanMpi(TrainerPod("launcher"), JobEnv(), TrainerEnv(1, true))->role,
      MpiRole::kNone);
  RunOptions pytorch = TrainerPod("launcher");
  pytorch.discovery.framework = Framework::kPyTorch;
  EXPECT_EQ(PlanMpi(pytorch, JobEnv(), TrainerEnv(0, true))->role,
            MpiRole::kNone);
}

TEST(MpiPlanTest, TrainerV2sLauncherWithNoCommandIsRefusedNamingWhy) {
  RunOptions options = TrainerPod("launcher");
  options.command.clear();
  auto plan = PlanMpi(options, JobEnv(), TrainerEnv(0, true));
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("Trainer v2 MPI launcher"),
            std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace distjob
