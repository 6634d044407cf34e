#include "agent/cli/torchrun_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/net.h"

namespace distjob {

void AddCurrentTorchrunFlags(FlagSet* flags, RunOptions* options) {
  LaunchOptions* o = &options->launch;
  Flag prefix = TorchrunFlag(
      "log-line-prefix-template", "TEMPLATE",
      "Prefix of tee'd console lines instead of [<role><local_rank>]:, with "
      "${role_name}, ${local_rank}, ${rank} and ${hostname}.",
      SetString(&o->log_line_prefix_template));
  // torchrun reads the template from this variable too.
  prefix.env.push_back("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
  flags->Add(std::move(prefix));
  flags->Add(TorchrunFlag(
      "duplicate-stdout-filters", "S[,S...]",
      "Tee'd stdout lines containing any of these substrings are also "
      "written to attempt_N/filtered_stdout.log (',,' is a comma).",
      [o](absl::string_view v, absl::string_view) {
        o->duplicate_stdout_filters = ParseDuplicateFilters(v);
        return absl::OkStatus();
      }));
  flags->Add(TorchrunFlag(
      "duplicate-stderr-filters", "S[,S...]",
      "Tee'd stderr lines containing any of these substrings are also "
      "written to attempt_N/filtered_stderr.log (',,' is a comma).",
      [o](absl::string_view v, absl::string_view) {
        o->duplicate_stderr_filters = ParseDuplicateFilters(v);
        return absl::OkStatus();
      }));
  flags->Add(TorchrunFlag(
      "virtual-local-rank", "",
      "Every worker gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES narrowed to "
      "its own device.",
      SetBool(&o->virtual_local_rank), /*is_bool=*/true));
  Flag numa = TorchrunFlag(
      "numa-binding", "node|socket|exclusive|core-complex",
      "Bind each local rank's CPUs and memory to its GPU's NUMA node (local "
      "rank n uses the n-th GPU of CUDA_VISIBLE_DEVICES), its socket, an "
      "exclusive share of the node, or "
      "one L3 core complex.",
      [o](absl::string_view v, absl::string_view) {
        auto mode = ParseNumaMode(v);
        if (!mode.ok()) return mode.status();
        o->numa_binding = std::string(v);
        return absl::OkStatus();
      });
  numa.env.clear();  // torchrun has no PET_NUMA_BINDING
  flags->Add(std::move(numa));
  Flag completion = TorchrunFlag(
      "print-completion", "bash|zsh|tcsh",
      "Print a shell completion script and exit (as `distjob-agent "
      "completion SHELL`).",
      [o](absl::string_view v, absl::string_view) {
        if (v == "bash" || v == "zsh" || v == "tcsh") {
          o->print_completion = std::string(v);
          return absl::OkStatus();
        }
        return absl::InvalidArgumentError(
            absl::StrCat("'", v, "' is not one of bash, zsh, tcsh"));
      });
  completion.env.clear();  // an action, not a setting
  flags->Add(std::move(completion));
  Flag logs_specs = TorchrunFlag(
      "logs-specs", "NAME",
      "Accepted for torchrun compatibility: a Python entry point a native "
      "launcher cannot load; the agent keeps torchrun's default layout.",
      [](absl::string_view v, absl::string_view source) {
        DJ_LOG_INFO(
            "{} {}: not applicable: torchrun.logs_specs entry points are "
            "Python classes; the agent writes torchrun's default log layout "
            "(--log-dir, --redirects, --tee)",
            source, v);
        return absl::OkStatus();
      });
  logs_specs.env.clear();  // torchrun has no PET_LOGS_SPECS
  flags->Add(std::move(logs_specs));
  flags->Add(AgentFlag(
      "worker-store", "agent|worker",
      "Who serves the workers' TCPStore (MASTER_ADDR:MASTER_PORT): agent "
      "(group rank 0's agent, TORCHELASTIC_USE_AGENT_STORE=True, as current "
      "torchrun; the default) or worker (worker rank 0, a free port every "
      "round, as torch 1.13).",
      [o](absl::string_view v, absl::string_view source) {
        if (v != "agent" && v != "worker") {
          return absl::InvalidArgumentError(
              absl::StrCat("'", v, "' is not one of: agent, worker"));
        }
        o->worker_store_agent = v == "agent";
        o->worker_store_setting =
            absl::StrCat(source, absl::StartsWith(source, "-") ? " " : "=", v);
        return absl::OkStatus();
      }));
}

std::vector<NumaBinding> PlanNumaBindings(const LaunchOptions& launch,
                                          const EnvMap& env,
                                          const std::string& root) {
  std::vector<NumaBinding> bindings(static_cast<size_t>(launch.nproc));
  if (launch.numa_binding.empty()) return bindings;
  auto mode = ParseNumaMode(launch.numa_binding);
  auto topology = ReadNumaTopology(root);
  if (!mode.ok() || !topology.ok()) {
    const std::string warning = absl::StrCat(
        "--numa-binding ", launch.numa_binding,
        ": no NUMA information on this machine (",
        mode.ok() ? topology.status().message() : mode.status().message(),
        "); the workers run unbound");
    DJ_LOG_WARNING("{}", warning);
    return bindings;
  }
  if (auto visible = Lookup(env, "CUDA_VISIBLE_DEVICES")) {
    *topology = NarrowToVisibleGpus(std::move(*topology), *visible);
  }
  for (int rank = 0; rank < launch.nproc; ++rank) {
    bindings[static_cast<size_t>(rank)] =
        BindingFor(*mode, rank, launch.nproc, *topology);
  }
  return bindings;
}

LinePolicy MakeLinePolicy(const LaunchOptions& launch, int local_rank, int rank,
                          int stream) {
  LinePolicy policy;
  policy.console = RankShown(launch.local_ranks_filter, local_rank);
  PrefixFields fields;
  fields.role_name = launch.role;
  fields.local_rank = local_rank;
  fields.rank = rank;
  if (launch.log_line_prefix_template.find("hostname") != std::string::npos) {
    fields.hostname = LocalHostname();
  }
  policy.prefix = RenderLinePrefix(launch.log_line_prefix_template, fields);
  policy.duplicate_filters = stream == 1 ? launch.duplicate_stdout_filters
                                         : launch.duplicate_stderr_filters;
  return policy;
}

}  // namespace distjob
