#include "launchers/mpi_env.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

using Hosts = std::vector<std::string>;

TEST(MpiEnvTest, EveryMpiGoesThroughRsh) {
  const EnvMap env = MpiLauncherEnv("/bin/distjob-agent", "/tmp/x/rsh");
  EXPECT_EQ(env.at("OMPI_MCA_plm_rsh_agent"), "/bin/distjob-agent rsh");
  EXPECT_EQ(env.at("PRTE_MCA_plm_ssh_agent"), "/bin/distjob-agent rsh");
  EXPECT_EQ(env.at("HYDRA_LAUNCHER"), "ssh");
  EXPECT_EQ(env.at("HYDRA_LAUNCHER_EXEC"), "/tmp/x/rsh");
  EXPECT_EQ(env.at("I_MPI_HYDRA_BOOTSTRAP"), "rsh");
  EXPECT_EQ(env.at("I_MPI_HYDRA_BOOTSTRAP_EXEC"), "/tmp/x/rsh");
}

TEST(MpiEnvTest, WorkersReachTheLauncherByNamesTheyResolve) {
  const EnvMap env = MpiReachabilityEnv({}, "eth0");
  EXPECT_EQ(env.at("OMPI_MCA_orte_keep_fqdn_hostnames"), "true");
  EXPECT_EQ(env.at("PRTE_MCA_prte_keep_fqdn_hostnames"), "true");
  EXPECT_EQ(env.at("HYDRA_IFACE"), "eth0");
  EXPECT_EQ(env.at("I_MPI_HYDRA_IFACE"), "eth0");
}

TEST(MpiEnvTest, TheJobsOwnReachabilitySettingsStand) {
  const EnvMap env = MpiReachabilityEnv(
      {{"OMPI_MCA_orte_keep_fqdn_hostnames", "false"}, {"HYDRA_IFACE", "ib0"}},
      "eth0");
  EXPECT_EQ(env.count("OMPI_MCA_orte_keep_fqdn_hostnames"), 0u);
  EXPECT_EQ(env.count("HYDRA_IFACE"), 0u);
  EXPECT_EQ(env.at("I_MPI_HYDRA_IFACE"), "eth0");
  // No interface found: Hydra keeps its own choice.
  EXPECT_EQ(MpiReachabilityEnv({}, "").count("HYDRA_IFACE"), 0u);
}

TEST(MpiEnvTest, HostfilesOfOpenMpiAndMpich) {
  EXPECT_EQ(ParseMpiHostfile("# the job\n"
                             "j-worker-0.j.ns.svc slots=2\n"
                             "\n"
                             "  j-worker-1.j.ns.svc slots=2 max_slots=4 \n"
                             "j-worker-0.j.ns.svc slots=2\n"),
            (Hosts{"j-worker-0.j.ns.svc", "j-worker-1.j.ns.svc"}));
  EXPECT_EQ(ParseMpiHostfile("a:4\nb:4 # second\n\tc"), (Hosts{"a", "b", "c"}));
  EXPECT_TRUE(ParseMpiHostfile("").empty());
}

TEST(MpiEnvTest, HostsFromTheCommandFirst) {
  auto s = FindMpiHosts({"mpirun", "-np", "4", "--hostfile", "/h", "python3"},
                        {{"OMPI_MCA_orte_default_hostfile", "/other"}});
  EXPECT_EQ(s.hostfile, "/h");
  EXPECT_EQ(s.origin, "mpirun's --hostfile");
  s = FindMpiHosts({"mpiexec.hydra", "-f=/m", "a.out"}, {});
  EXPECT_EQ(s.hostfile, "/m");
  s = FindMpiHosts({"mpirun", "-H", "a:2,b:2,a", "prog"}, {});
  EXPECT_TRUE(s.hostfile.empty());
  EXPECT_EQ(s.hosts, (Hosts{"a", "b"}));
}

TEST(MpiEnvTest, HostsFromTheEnvironmentThenTheOperatorsFile) {
  auto s = FindMpiHosts({"mpirun", "prog"}, {{"HYDRA_HOST_FILE", "/hy"}});
  EXPECT_EQ(s.hostfile, "/hy");
  EXPECT_EQ(s.origin, "HYDRA_HOST_FILE");
  s = FindMpiHosts({"mpirun", "prog"}, {});
  EXPECT_EQ(s.hostfile, "/etc/mpi/hostfile");
}

TEST(MpiEnvTest, WrittenHostfilesInEachMpisFormat) {
  const Hosts hosts = {"j-mpiworker-0.j", "j-mpiworker-1.j"};
  EXPECT_EQ(OpenMpiHostfile(hosts, 4),
            "j-mpiworker-0.j slots=4\nj-mpiworker-1.j slots=4\n");
  EXPECT_EQ(HydraHostfile(hosts, 2), "j-mpiworker-0.j:2\nj-mpiworker-1.j:2\n");
  // What the agent writes, its own parser reads back.
  EXPECT_EQ(ParseMpiHostfile(OpenMpiHostfile(hosts, 1)), hosts);
  EXPECT_EQ(ParseMpiHostfile(HydraHostfile(hosts, 1)), hosts);
}

TEST(MpiEnvTest, EveryMpiIsPointedAtTheWrittenHostfile) {
  const EnvMap env = MpiHostfileEnv("/run/h", "/run/h.hydra");
  EXPECT_EQ(env.at("OMPI_MCA_orte_default_hostfile"), "/run/h");
  EXPECT_EQ(env.at("PRTE_MCA_prte_default_hostfile"), "/run/h");
  EXPECT_EQ(env.at("HYDRA_HOST_FILE"), "/run/h.hydra");
  EXPECT_EQ(env.at("I_MPI_HYDRA_HOST_FILE"), "/run/h.hydra");
  // Each is a variable FindMpiHosts reads: a job the agent already
  // pointed at its hostfile finds that file again.
  for (const auto& [name, path] : env) {
    EXPECT_EQ(FindMpiHosts({"mpirun", "prog"}, {{name, path}}).hostfile, path)
        << name;
  }
}

TEST(MpiEnvTest, SlotsFromNprocPerNodeThenTheOperatorsVariable) {
  EXPECT_EQ(MpiSlotsPerHost(8, {{"OMPI_MCA_orte_set_default_slots", "2"}}), 8);
  EXPECT_EQ(MpiSlotsPerHost(1, {{"OMPI_MCA_orte_set_default_slots", "2"}}), 2);
  EXPECT_EQ(MpiSlotsPerHost(1, {{"OMPI_MCA_orte_set_default_slots", "x"}}), 1);
  EXPECT_EQ(MpiSlotsPerHost(1, {{"OMPI_MCA_orte_set_default_slots", "0"}}), 1);
  EXPECT_EQ(MpiSlotsPerHost(1, {}), 1);
}

}  // namespace
}  // namespace distjob
