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

}  // namespace
}  // namespace distjob
