// MPI jobs' launcher side: the variables that make every supported MPI
// start its remote daemons through `distjob-agent rsh` instead of ssh,
// and where the launcher's command line or environment names the hosts
// mpirun will reach (whose spawn servers the launcher waits for).
#ifndef DISTJOB_LAUNCHERS_MPI_ENV_H_
#define DISTJOB_LAUNCHERS_MPI_ENV_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/environment.h"

namespace distjob {

// The remote-launch variables. Open MPI 4 (OMPI_MCA_plm_rsh_agent) and
// Open MPI 5's PRRTE (PRTE_MCA_plm_ssh_agent) split their value into a
// program and its arguments: they get "`agent_path` rsh". MPICH's Hydra
// (HYDRA_LAUNCHER_EXEC) and Intel MPI (I_MPI_HYDRA_BOOTSTRAP_EXEC) exec the
// value as one program: they get `rsh_program`, a name under which the
// agent runs as rsh. HYDRA_LAUNCHER=ssh and I_MPI_HYDRA_BOOTSTRAP=rsh
// select those launchers.
EnvMap MpiLauncherEnv(const std::string& agent_path,
                      const std::string& rsh_program);

// What lets the workers reach the launcher's mpirun, each variable only
// where `env` leaves it unset. Open MPI 4 and PRRTE keep the hostfile's
// names whole (OMPI_MCA_orte_keep_fqdn_hostnames,
// PRTE_MCA_prte_keep_fqdn_hostnames): they otherwise cut "w-0.job" to
// "w-0", which no other pod of a Volcano job resolves. MPICH's and Intel
// MPI's proxies call back to the launcher's address on `iface`
// (HYDRA_IFACE, I_MPI_HYDRA_IFACE) rather than to its bare host name;
// neither when `iface` is empty.
EnvMap MpiReachabilityEnv(const EnvMap& env, const std::string& iface);

// The hosts of an MPI hostfile: the first word of each line that is not
// blank or a comment (`HOST slots=N` for Open MPI, `HOST:N` for MPICH and
// Intel MPI, the `:N` dropped), each once, in order.
std::vector<std::string> ParseMpiHostfile(absl::string_view text);

// Where the hosts are named, in the order mpirun itself looks: the
// command's --hostfile/--machinefile/-f, or its -H/--host/-hosts list;
// else the MPIs' hostfile variables; else the operators' /etc/mpi/hostfile.
struct MpiHostSource {
  std::string hostfile;            // a path to read, or empty
  std::vector<std::string> hosts;  // a host list given inline
  std::string origin;              // the option or variable, for messages
};
MpiHostSource FindMpiHosts(const std::vector<std::string>& command,
                           const EnvMap& env);

// A hostfile naming `hosts`, `slots` each: as Open MPI and PRRTE read it
// ("HOST slots=N"), and as MPICH's Hydra and Intel MPI do ("HOST:N"; Hydra
// rejects Open MPI's `slots=`).
std::string OpenMpiHostfile(const std::vector<std::string>& hosts, int slots);
std::string HydraHostfile(const std::vector<std::string>& hosts, int slots);

// The variables that name a hostfile to each MPI's mpirun when its command
// names none: `open_mpi` to Open MPI 4 (OMPI_MCA_orte_default_hostfile)
// and Open MPI 5's PRRTE (PRTE_MCA_prte_default_hostfile), `hydra` to
// MPICH (HYDRA_HOST_FILE) and Intel MPI (I_MPI_HYDRA_HOST_FILE).
EnvMap MpiHostfileEnv(const std::string& open_mpi, const std::string& hydra);

// The operators' slots per host (Kubeflow's MPIJob sets it on the
// launcher).
inline constexpr char kMpiSlotsVariable[] = "OMPI_MCA_orte_set_default_slots";

// The slots a written hostfile gives each host: --nproc-per-node when it
// is not 1, else kMpiSlotsVariable when it is a positive integer, else 1.
int MpiSlotsPerHost(int nproc_per_node, const EnvMap& env);

// The default hostfile of Kubeflow's MPIJob and Trainer v2's MPI runtime.
inline constexpr char kOperatorHostfile[] = "/etc/mpi/hostfile";

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_MPI_ENV_H_
