#include "launchers/mpi_env.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace distjob {
namespace {

// A host as the MPIs write it, without MPICH's `:slots`.
std::string HostOf(absl::string_view word) {
  return std::string(word.substr(0, word.find(':')));
}

void AddOnce(std::vector<std::string>* hosts, std::string host) {
  if (host.empty()) return;
  if (std::find(hosts->begin(), hosts->end(), host) != hosts->end()) return;
  hosts->push_back(std::move(host));
}

// The value of option `arg` (at command[*i]) if it is one of `names`, as
// "NAME VALUE" or "NAME=VALUE"; advances *i past a separate value.
bool OptionValue(const std::vector<std::string>& command, size_t* i,
                 std::initializer_list<absl::string_view> names,
                 std::string* value) {
  const std::string& arg = command[*i];
  for (absl::string_view name : names) {
    if (arg == name && *i + 1 < command.size()) {
      *value = command[++*i];
      return true;
    }
    if (absl::StartsWith(arg, name) && arg.size() > name.size() &&
        arg[name.size()] == '=') {
      *value = arg.substr(name.size() + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

EnvMap MpiLauncherEnv(const std::string& agent_path,
                      const std::string& rsh_program) {
  const std::string with_args = agent_path + " rsh";
  return {
      {"OMPI_MCA_plm_rsh_agent", with_args},
      {"PRTE_MCA_plm_ssh_agent", with_args},
      {"HYDRA_LAUNCHER", "ssh"},
      {"HYDRA_LAUNCHER_EXEC", rsh_program},
      {"I_MPI_HYDRA_BOOTSTRAP", "rsh"},
      {"I_MPI_HYDRA_BOOTSTRAP_EXEC", rsh_program},
  };
}

EnvMap MpiReachabilityEnv(const EnvMap& env, const std::string& iface) {
  EnvMap out;
  const auto set_unless_given = [&](const std::string& name,
                                    const std::string& value) {
    if (!value.empty() && !Lookup(env, name).has_value()) out[name] = value;
  };
  set_unless_given("OMPI_MCA_orte_keep_fqdn_hostnames", "true");
  set_unless_given("PRTE_MCA_prte_keep_fqdn_hostnames", "true");
  set_unless_given("HYDRA_IFACE", iface);
  set_unless_given("I_MPI_HYDRA_IFACE", iface);
  return out;
}

std::vector<std::string> ParseMpiHostfile(absl::string_view text) {
  std::vector<std::string> hosts;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = line.substr(0, line.find('#'));
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const absl::string_view word = line.substr(0, line.find_first_of(" \t"));
    AddOnce(&hosts, HostOf(word));
  }
  return hosts;
}

std::string OpenMpiHostfile(const std::vector<std::string>& hosts, int slots) {
  std::string text;
  for (const std::string& h : hosts) {
    absl::StrAppend(&text, h, " slots=", slots, "\n");
  }
  return text;
}

std::string HydraHostfile(const std::vector<std::string>& hosts, int slots) {
  std::string text;
  for (const std::string& h : hosts)
    absl::StrAppend(&text, h, ":", slots, "\n");
  return text;
}

EnvMap MpiHostfileEnv(const std::string& open_mpi, const std::string& hydra) {
  return {
      {"OMPI_MCA_orte_default_hostfile", open_mpi},
      {"PRTE_MCA_prte_default_hostfile", open_mpi},
      {"HYDRA_HOST_FILE", hydra},
      {"I_MPI_HYDRA_HOST_FILE", hydra},
  };
}

int MpiSlotsPerHost(int nproc_per_node, const EnvMap& env) {
  if (nproc_per_node > 1) return nproc_per_node;
  int slots = 0;
  const std::string value = Lookup(env, kMpiSlotsVariable).value_or("");
  if (absl::SimpleAtoi(value, &slots) && slots > 0) return slots;
  return 1;
}

MpiHostSource FindMpiHosts(const std::vector<std::string>& command,
                           const EnvMap& env) {
  MpiHostSource source;
  std::string value;
  // The launcher program itself (mpirun, mpiexec, ...) is command[0].
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string arg = command[i];
    if (OptionValue(command, &i,
                    {"--hostfile", "-hostfile", "--machinefile", "-machinefile",
                     "--default-hostfile", "-f"},
                    &value)) {
      source.hostfile = value;
      source.origin = "mpirun's " + arg.substr(0, arg.find('='));
      return source;
    }
    if (OptionValue(command, &i, {"-H", "--host", "-host", "-hosts"}, &value)) {
      for (absl::string_view h : absl::StrSplit(value, ',')) {
        AddOnce(&source.hosts, HostOf(h));
      }
      source.origin = "mpirun's " + arg.substr(0, arg.find('='));
      return source;
    }
  }
  for (const char* var :
       {"OMPI_MCA_orte_default_hostfile", "PRTE_MCA_prte_default_hostfile",
        "HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE"}) {
    if (auto v = Lookup(env, var); v.has_value() && !v->empty()) {
      source.hostfile = *v;
      source.origin = var;
      return source;
    }
  }
  source.hostfile = kOperatorHostfile;
  source.origin = "the MPI operators' hostfile";
  return source;
}

}  // namespace distjob
