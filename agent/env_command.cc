#include "agent/env_command.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/run_flags.h"
#include "common/logging.h"
#include "discovery/dns_resolver.h"
#include "launchers/framework.h"
#include "launchers/mxnet.h"
#include "launchers/pytorch_env.h"
#include "launchers/pytorch_operator.h"
#include "launchers/tensorflow.h"
#include "launchers/worker_command.h"

namespace distjob {
namespace {

// As agent/agent_loop.h, which depends on this library.
constexpr int kExitBadConfig = 2;
constexpr int kExitRendezvousUnavailable = 138;
constexpr char kPlaceholder[] = "distjob-agent-env-placeholder";

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  return inet_pton(AF_INET, h.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

std::string LocalHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

absl::StatusOr<Cluster> FindPeers(const DiscoveryOptions& d, const EnvMap& env,
                                  const std::string& job) {
  if (!d.peers.empty()) return ParseStaticPeers(d.peers, "flag --peers");
  if (!d.peers_file.empty()) return ReadPeersFile(d.peers_file);
  if (!d.replicas.empty()) {
    return KubeflowPeers(job, d.replicas, d.k8s_namespace, d.cluster_domain);
  }
  return ReadVolcanoPeers(d.volcano_dir, env);
}

// The source of a torchrun option, for --explain.
std::string LaunchSource(const std::vector<std::string>& args,
                         const EnvMap& env, const std::string& flag,
                         const std::string& pet) {
  std::string underscored = flag;
  for (char& c : underscored) {
    if (c == '-') c = '_';
  }
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "--" + flag || a == "--" + underscored ||
        absl::StartsWith(a, "--" + flag + "=") ||
        absl::StartsWith(a, "--" + underscored + "=")) {
      return "flag --" + flag;
    }
  }
  if (Lookup(env, pet)) return "env " + pet;
  return "default";
}

}  // namespace

int JobEnvExitCode(const absl::Status& status) {
  return status.code() == absl::StatusCode::kDeadlineExceeded
             ? kExitRendezvousUnavailable
             : kExitBadConfig;
}

absl::StatusOr<JobEnv> ResolveJobEnv(const RunOptions& options,
                                     const EnvMap& env,
                                     std::function<bool()> cancelled) {
  const DiscoveryOptions& d = options.discovery;
  JobEnv job;
  // Kubeflow names embed the job name, which may itself come from the
  // hostname: resolve the identity against the replica types first.
  auto cluster = FindPeers(d, env, d.job_name.empty() ? "job" : d.job_name);
  if (!cluster.ok()) return cluster.status();
  job.cluster = std::move(*cluster);

  TensorFlowOptions tf;
  tf.port = d.tf_port;
  tf.include_evaluator = !d.tf_no_evaluator;
  tf.override_existing = d.override_tf_config;
  if (absl::Status s = ParseTfRoles(d.tf_roles, &tf.roles); !s.ok()) return s;

  const bool wants_identity = !job.cluster.tasks.empty() ||
                              d.framework != "auto" || !d.job_name.empty() ||
                              !d.task.empty();
  if (!wants_identity) {
    // torchrun's PET_* alone (Kubeflow's elastic PyTorchJob) say PyTorch;
    // the rendezvous, not the operator's layout, places the node.
    FrameworkChoice choice =
        ChooseFramework(d.framework, job.cluster, env, tf.roles);
    if (choice.framework == "pytorch") {
      job.framework = choice.framework;
      job.framework_reason = choice.reason;
      return job;
    }
    job.framework_reason = "no peers found";
    // A kept TF_CONFIG must still be sane: a garbage one is a config error.
    if (Lookup(env, "TF_CONFIG")) {
      auto checked = TensorFlowEnv({}, job.cluster, tf, env);
      if (!checked.ok()) return checked.status();
    }
    return job;
  }
  FrameworkChoice choice =
      ChooseFramework(d.framework, job.cluster, env, tf.roles);
  job.framework = choice.framework;
  job.framework_reason = choice.reason;
  if (job.cluster.tasks.empty() && job.framework != "none") {
    if (job.framework == "tensorflow" && Lookup(env, "TF_CONFIG")) {
      auto checked = TensorFlowEnv({}, job.cluster, tf, env);
      if (!checked.ok()) return checked.status();
      return job;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--framework ", job.framework, " needs peers: none in ", d.volcano_dir,
        " or VC_*_HOSTS; set --peers, --peers-file or --replicas"));
  }
  IdentityInputs in;
  in.job = d.job_name;
  in.task = d.task;
  in.index = d.task_index;
  in.hostname = d.hostname.empty() ? LocalHostname() : d.hostname;
  auto identity = ResolveIdentity(in, env, job.cluster);
  if (!identity.ok()) return identity.status();
  job.identity = std::move(*identity);
  job.has_identity = true;
  if (!d.replicas.empty() && d.job_name.empty()) {
    auto named = FindPeers(d, env, job.identity.id.job);
    if (!named.ok()) return named.status();
    job.cluster = std::move(*named);
  }
  DJ_LOG_INFO("this pod is job={} task={} index={}; framework {} ({})",
              job.identity.id.job, job.identity.id.task, job.identity.id.index,
              job.framework, job.framework_reason);

  // A standalone job dials no peer: waiting for their names (the pod's own
  // included, which exists only once the pod is Ready) could only hang it.
  if (!options.launch.standalone && !job.cluster.tasks.empty() &&
      d.dns_timeout > absl::ZeroDuration()) {
    std::vector<std::string> names;
    for (const TaskPeers& t : job.cluster.tasks) {
      for (const std::string& h : t.hosts) {
        if (!IsIpLiteral(h)) names.push_back(h);
      }
    }
    if (!names.empty()) {
      DnsOptions dns;
      dns.servers = d.dns_servers;
      dns.timeout = d.dns_timeout;
      dns.cancelled = std::move(cancelled);
      auto resolved = WaitForNames(names, dns);
      if (!resolved.ok()) return resolved.status();
    }
  }

  const Identity& self = job.identity.id;
  if (job.framework == "tensorflow") {
    auto out = TensorFlowEnv(self, job.cluster, tf, env);
    if (!out.ok()) return out.status();
    job.extra = std::move(*out);
  } else if (job.framework == "mxnet") {
    MXNetOptions mx;
    mx.port = d.mxnet_port;
    auto out = MXNetEnv(self, job.cluster, mx);
    if (!out.ok()) return out.status();
    job.extra = std::move(*out);
  } else if (job.framework == "pytorch" && job.cluster.Find("master")) {
    // The operators' non-elastic master/worker layout. Without a master
    // task (Kubeflow's elastic PyTorchJob) the rendezvous places the node.
    auto layout = PyTorchOperatorNodes(self, job.cluster);
    if (!layout.ok()) return layout.status();
    job.pytorch_layout = true;
    job.node_rank = layout->node_rank;
    job.nnodes = layout->nnodes;
    job.master_addr = layout->master_addr;
    job.master_source = job.cluster.Find("master")->origin;
    // The operators publish the port they opened (Volcano 23456, Kubeflow
    // the container port); torchrun's --master-port otherwise.
    job.master_port = options.launch.master_port;
    if (auto port = Lookup(env, "MASTER_PORT"); port.has_value()) {
      int p = 0;
      if (!absl::SimpleAtoi(*port, &p) || p < 1 || p > 65535) {
        return absl::InvalidArgumentError(absl::StrCat(
            "env MASTER_PORT='", *port, "' is not a port (1-65535)"));
      }
      job.master_port = p;
    }
  }
  return job;
}

void ApplyJobEnv(const JobEnv& job, LaunchOptions* launch) {
  if (!job.pytorch_layout) return;
  launch->node_rank = job.node_rank;
  launch->min_nodes = launch->max_nodes = job.nnodes;
  launch->nnodes = absl::StrCat(job.nnodes);
  launch->master_addr = job.master_addr;
  launch->master_port = job.master_port;
}

int EnvCommand(const std::vector<std::string>& raw_args, const EnvMap& env) {
  bool json = false;
  bool explain = false;
  std::vector<std::string> args;
  bool in_command = false;
  for (const std::string& a : raw_args) {
    if (!in_command && a == "--json") {
      json = true;
    } else if (!in_command && a == "--explain") {
      explain = true;
    } else {
      if (a == "--") in_command = true;
      args.push_back(a);
    }
  }
  if (!in_command) {
    // The command is optional here; run's parser wants one.
    args.push_back("--");
  }
  args.push_back(kPlaceholder);
  auto options = ParseRunOptions(args, env);
  if (!options.ok()) {
    std::fprintf(stderr, "distjob-agent env: %s\n",
                 std::string(options.status().message()).c_str());
    return kExitBadConfig;
  }
  InitLogging(options->log_level);
  std::vector<std::string>& cmd = options->command;
  if (!cmd.empty() && cmd.back() == kPlaceholder) cmd.pop_back();
  if (!in_command && !cmd.empty() && cmd.back() == "--") cmd.pop_back();
  auto job = ResolveJobEnv(*options, env);
  if (!job.ok()) {
    std::fprintf(stderr, "distjob-agent env: %s\n",
                 std::string(job.status().message()).c_str());
    return JobEnvExitCode(job.status());
  }
  LaunchOptions launch = options->launch;
  ApplyJobEnv(*job, &launch);

  EnvMap base = env;
  for (const auto& [k, v] : job->extra.vars) base[k] = v;
  PyTorchGroupInfo group;
  group.group_rank = launch.node_rank;
  group.group_world_size = launch.max_nodes;
  group.base_rank = launch.node_rank * launch.nproc;
  group.world_size = launch.max_nodes * launch.nproc;
  group.role_base_rank = group.base_rank;
  group.role_world_size = group.world_size;
  group.local_world_size = launch.nproc;
  group.role_name = launch.role;
  group.master_addr = launch.master_addr;
  group.master_port = launch.master_port;
  group.max_restarts = launch.max_restarts;
  group.run_id = launch.rdzv_id;
  WorkerCommandOptions command;
  command.module = launch.module;
  command.no_python = launch.no_python;
  command.python = Lookup(env, "PYTHON_EXEC").value_or("python3");

  std::map<std::string, std::string> launch_sources = {
      {"MASTER_ADDR",
       job->pytorch_layout
           ? job->master_source
           : LaunchSource(args, env, "master-addr", "PET_MASTER_ADDR")},
      {"MASTER_PORT",
       job->pytorch_layout && Lookup(env, "MASTER_PORT")
           ? "env MASTER_PORT"
           : LaunchSource(args, env, "master-port", "PET_MASTER_PORT")},
      {"LOCAL_WORLD_SIZE",
       LaunchSource(args, env, "nproc-per-node", "PET_NPROC_PER_NODE")},
  };
  const std::string rank_source =
      job->pytorch_layout
          ? absl::StrCat("task ", job->identity.id.task, " index ",
                         job->identity.id.index)
          : LaunchSource(args, env, "node-rank", "PET_NODE_RANK");
  for (const char* k : {"GROUP_RANK", "RANK", "ROLE_RANK"}) {
    launch_sources[k] = rank_source;
  }
  for (const char* k : {"WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"}) {
    launch_sources[k] =
        job->pytorch_layout
            ? std::string(PeerSourceName(job->cluster.source)) + " peers"
            : LaunchSource(args, env, "nnodes", "PET_NNODES");
  }

  std::string out;
  if (json) {
    out = absl::StrCat("{\"framework\":", JsonQuote(job->framework));
    // Always an object (empty job/task, index -1 when nothing identified
    // this pod), so consumers need not special-case a plain torchrun job.
    absl::StrAppend(&out,
                    ",\"identity\":{\"job\":", JsonQuote(job->identity.id.job),
                    ",\"task\":", JsonQuote(job->identity.id.task),
                    ",\"index\":", job->identity.id.index, "}");
    absl::StrAppend(&out, ",\"workers\":[");
  }
  for (int local_rank = 0; local_rank < launch.nproc; ++local_rank) {
    const EnvMap full = PyTorchWorkerEnv(group, local_rank, base, "");
    std::map<std::string, std::string> changed;
    for (const auto& [k, v] : full) {
      auto inherited = Lookup(env, k);
      if (!inherited.has_value() || *inherited != v) changed[k] = v;
    }
    auto source_of = [&](const std::string& k) -> std::string {
      if (auto it = job->extra.sources.find(k);
          it != job->extra.sources.end()) {
        return it->second;
      }
      if (auto it = launch_sources.find(k); it != launch_sources.end()) {
        return it->second;
      }
      return "default";
    };
    if (json) {
      std::vector<std::string> argv_items, env_items, src_items;
      const std::vector<std::string> argv =
          options->command.empty()
              ? std::vector<std::string>{}
              : WorkerArgv(options->command, command, local_rank);
      for (const std::string& a : argv) argv_items.push_back(JsonQuote(a));
      for (const auto& [k, v] : changed) {
        env_items.push_back(absl::StrCat(JsonQuote(k), ":", JsonQuote(v)));
        src_items.push_back(
            absl::StrCat(JsonQuote(k), ":", JsonQuote(source_of(k))));
      }
      absl::StrAppend(&out, local_rank ? "," : "",
                      "{\"local_rank\":", local_rank, ",\"argv\":[",
                      absl::StrJoin(argv_items, ","), "],\"env\":{",
                      absl::StrJoin(env_items, ","), "}");
      if (explain) {
        absl::StrAppend(&out, ",\"sources\":{", absl::StrJoin(src_items, ","),
                        "}");
      }
      out += "}";
    } else {
      absl::StrAppend(&out, "# local_rank ", local_rank, "\n");
      for (const auto& [k, v] : changed) {
        absl::StrAppend(&out, k, "=", v);
        if (explain) absl::StrAppend(&out, "  # ", source_of(k));
        out += "\n";
      }
    }
  }
  if (json) out += "]}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace distjob
