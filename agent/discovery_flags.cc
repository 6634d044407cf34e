#include "agent/discovery_flags.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/duration.h"
#include "launchers/tensorflow.h"

namespace distjob {
namespace {

using Setter =
    std::function<absl::Status(absl::string_view, absl::string_view)>;

Flag Make(const std::string& name, std::string metavar, std::string help,
          Setter set, bool is_bool = false) {
  Flag flag;
  flag.names = {name};
  std::string var = "DISTJOB_" + absl::AsciiStrToUpper(name);
  for (char& c : var) {
    if (c == '-') c = '_';
  }
  flag.env = {var};
  flag.metavar = std::move(metavar);
  flag.help = std::move(help);
  flag.set = std::move(set);
  flag.is_bool = is_bool;
  return flag;
}

Setter String(std::string* out) {
  return [out](absl::string_view v, absl::string_view) {
    *out = std::string(v);
    return absl::OkStatus();
  };
}

Setter Bool(bool* out) {
  return [out](absl::string_view v, absl::string_view) {
    *out = v != "0";
    return absl::OkStatus();
  };
}

Setter Int(int* out, int min, int max) {
  return [out, min, max](absl::string_view v, absl::string_view) {
    auto n = ParseInt(v, min, max);
    if (!n.ok()) return n.status();
    *out = *n;
    return absl::OkStatus();
  };
}

}  // namespace

void AddDiscoveryFlags(FlagSet* flags, RunOptions* options) {
  DiscoveryOptions* d = &options->discovery;
  flags->Add(Make("job-name", "NAME",
                  "Job name (default: from the hostname <job>-<task>-<i>).",
                  String(&d->job_name)));
  flags->Add(Make("task", "NAME",
                  "This pod's task (role) name (default: from the hostname).",
                  String(&d->task)));
  flags->Add(Make("task-index", "N",
                  "This pod's index in its task (default: VC_TASK_INDEX, "
                  "VK_TASK_INDEX, then the hostname).",
                  Int(&d->task_index, 0, 1000000)));
  flags->Add(Make("hostname", "NAME",
                  "Pod name to derive the identity from (default: the "
                  "hostname).",
                  String(&d->hostname)));
  flags->Add(Make("volcano-dir", "DIR",
                  "Where Volcano's svc plugin mounts <task>.host files "
                  "(default /etc/volcano).",
                  String(&d->volcano_dir)));
  flags->Add(Make("replicas", "TYPE=N[,TYPE=N...]",
                  "Kubeflow replica counts; peers are <job>-<type>-<i>.",
                  String(&d->replicas)));
  flags->Add(Make("namespace", "NS",
                  "With --replicas: hosts are <job>-<type>-<i>.<NS>.svc.",
                  String(&d->k8s_namespace)));
  flags->Add(Make("cluster-domain", "DOMAIN",
                  "With --namespace: appended after .svc (as Kubeflow's "
                  "CUSTOM_CLUSTER_DOMAIN).",
                  String(&d->cluster_domain)));
  flags->Add(Make("peers", "TASK=H1,H2[;TASK2=H3]",
                  "Static peers; index = position.", String(&d->peers)));
  flags->Add(Make("peers-file", "PATH",
                  "Static peers, one TASK=H1,H2 per line.",
                  String(&d->peers_file)));
  flags->Add(Make("dns-server", "IP[:PORT][,...]",
                  "DNS servers instead of /etc/resolv.conf's (and no "
                  "/etc/hosts).",
                  [d](absl::string_view v, absl::string_view) {
                    d->dns_servers = absl::StrSplit(v, ',', absl::SkipEmpty());
                    return absl::OkStatus();
                  }));
  flags->Add(Make("dns-timeout", "SECONDS",
                  "How long to wait for every peer name to resolve (default "
                  "300s; 0 skips the wait).",
                  [d](absl::string_view v, absl::string_view) {
                    auto t = ParseDuration(v, "value");
                    if (!t.ok()) return t.status();
                    d->dns_timeout = *t;
                    return absl::OkStatus();
                  }));
  flags->Add(Make("no-barrier", "",
                  "Start workers without waiting for the whole cluster in "
                  "the store.",
                  Bool(&d->no_barrier), /*is_bool=*/true));
  flags->Add(Make("barrier-port", "PORT",
                  "Port of the start barrier's store, hosted by the "
                  "cluster's first pod (default 29401).",
                  Int(&d->barrier_port, 1, 65535)));
  flags->Add(Make("barrier-timeout", "SECONDS",
                  "How long the start barrier waits for the whole cluster "
                  "(default 600s); then exit 138 naming the missing pods.",
                  [d](absl::string_view v, absl::string_view) {
                    auto t = ParseDuration(v, "value");
                    if (!t.ok()) return t.status();
                    if (*t <= absl::ZeroDuration()) {
                      return absl::InvalidArgumentError(absl::StrCat(
                          "'", v, "' is not a positive number of seconds"));
                    }
                    d->barrier_timeout = *t;
                    return absl::OkStatus();
                  }));
  flags->Add(Make("framework", "auto|pytorch|tensorflow|mxnet|none",
                  "Which framework environment to build (default auto: "
                  "from the task names and the operator's env).",
                  [d](absl::string_view v, absl::string_view) {
                    if (v != "auto" && v != "pytorch" && v != "tensorflow" &&
                        v != "mxnet" && v != "none") {
                      return absl::InvalidArgumentError(absl::StrCat(
                          "'", v,
                          "' is not one of auto, pytorch, tensorflow, "
                          "mxnet, none"));
                    }
                    d->framework = std::string(v);
                    return absl::OkStatus();
                  }));
  flags->Add(Make("tf-port", "PORT", "TF_CONFIG port (default 2222).",
                  Int(&d->tf_port, 1, 65535)));
  flags->Add(Make("tf-roles", "ROLE=TASK[,...]",
                  "Task names of the TF roles (default "
                  "ps=ps,worker=worker,chief=chief,evaluator=evaluator).",
                  [d](absl::string_view v, absl::string_view) {
                    TensorFlowOptions tf;
                    if (absl::Status s = ParseTfRoles(v, &tf.roles); !s.ok()) {
                      return s;
                    }
                    d->tf_roles = std::string(v);
                    return absl::OkStatus();
                  }));
  flags->Add(Make("tf-no-evaluator", "",
                  "Leave the evaluator out of TF_CONFIG's cluster.",
                  Bool(&d->tf_no_evaluator), /*is_bool=*/true));
  flags->Add(Make("override-tf-config", "",
                  "Replace a TF_CONFIG already in the environment.",
                  Bool(&d->override_tf_config), /*is_bool=*/true));
  flags->Add(Make("mxnet-port", "PORT", "DMLC_PS_ROOT_PORT (default 9091).",
                  Int(&d->mxnet_port, 1, 65535)));
}

}  // namespace distjob
