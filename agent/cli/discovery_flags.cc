#include "agent/cli/discovery_flags.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/duration.h"
#include "discovery/framework.h"
#include "launchers/tensorflow.h"

namespace distjob {
void AddDiscoveryFlags(FlagSet* flags, RunOptions* options) {
  DiscoveryOptions* d = &options->discovery;
  flags->Add(
      AgentFlag("job-name", "NAME",
                "Job name (default: from the hostname <job>-<task>-<i>).",
                SetString(&d->job_name)));
  flags->Add(
      AgentFlag("task", "NAME",
                "This pod's task (role) name (default: from the hostname).",
                SetString(&d->task)));
  flags->Add(AgentFlag("task-index", "N",
                       "This pod's index in its task (default: VC_TASK_INDEX, "
                       "VK_TASK_INDEX, then the hostname).",
                       SetInt(&d->task_index, 0, 1000000)));
  flags->Add(AgentFlag("hostname", "NAME",
                       "Pod name to derive the identity from (default: the "
                       "hostname).",
                       SetHostName(&d->hostname)));
  flags->Add(AgentFlag("volcano-dir", "DIR",
                       "Where Volcano's svc plugin mounts <task>.host files "
                       "(default /etc/volcano).",
                       SetString(&d->volcano_dir)));
  flags->Add(AgentFlag("replicas", "TYPE=N[,TYPE=N...]",
                       "Kubeflow replica counts; peers are <job>-<type>-<i>.",
                       SetString(&d->replicas)));
  flags->Add(AgentFlag("namespace", "NS",
                       "With --replicas: hosts are <job>-<type>-<i>.<NS>.svc.",
                       SetHostName(&d->k8s_namespace)));
  flags->Add(AgentFlag("cluster-domain", "DOMAIN",
                       "With --namespace: appended after .svc (as Kubeflow's "
                       "CUSTOM_CLUSTER_DOMAIN).",
                       SetHostName(&d->cluster_domain)));
  flags->Add(AgentFlag("peers", "TASK=H1,H2[;TASK2=H3]",
                       "Static peers; index = position.",
                       SetString(&d->peers)));
  flags->Add(AgentFlag("peers-file", "PATH",
                       "Static peers, one TASK=H1,H2 per line.",
                       SetString(&d->peers_file)));
  flags->Add(AgentFlag("dns-server", "IP[:PORT][,...]",
                       "DNS servers instead of /etc/resolv.conf's (and no "
                       "/etc/hosts).",
                       [d](absl::string_view v, absl::string_view) {
                         d->dns_servers =
                             absl::StrSplit(v, ',', absl::SkipEmpty());
                         return absl::OkStatus();
                       }));
  flags->Add(
      AgentFlag("dns-timeout", "SECONDS",
                "How long to wait for every peer name to resolve (default "
                "300s; 0 skips the wait).",
                SetDuration(&d->dns_timeout)));
  flags->Add(AgentFlag("no-barrier", "",
                       "Start workers without waiting for the whole cluster in "
                       "the store.",
                       SetBool(&d->no_barrier), /*is_bool=*/true));
  flags->Add(AgentFlag("barrier-port", "PORT",
                       "Port of the start barrier's store, hosted by the "
                       "cluster's first pod (default 29401).",
                       SetInt(&d->barrier_port, 1, 65535)));
  flags->Add(
      AgentFlag("barrier-timeout", "SECONDS",
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
  flags->Add(AgentFlag("framework", "auto|pytorch|tensorflow|mxnet|mpi|none",
                       "Which framework environment to build (default auto: "
                       "from the task names and the operator's env).",
                       SetParsed(&d->framework, ParseFramework)));
  flags->Add(AgentFlag("tf-port", "PORT", "TF_CONFIG port (default 2222).",
                       SetInt(&d->tf_port, 1, 65535)));
  flags->Add(
      AgentFlag("tf-roles", "ROLE=TASK[,...]",
                "Task names of the TF roles (default "
                "ps=ps,worker=worker,chief=chief,evaluator=evaluator).",
                [d](absl::string_view v, absl::string_view) {
                  // Over the defaults, not over an earlier value.
                  std::map<std::string, std::string> roles = DefaultTfRoles();
                  if (absl::Status s = ParseTfRoles(v, &roles); !s.ok()) {
                    return s;
                  }
                  d->tf_roles = std::move(roles);
                  return absl::OkStatus();
                }));
  flags->Add(AgentFlag("tf-no-evaluator", "",
                       "Leave the evaluator out of TF_CONFIG's cluster.",
                       SetBool(&d->tf_no_evaluator), /*is_bool=*/true));
  flags->Add(AgentFlag("override-tf-config", "",
                       "Replace a TF_CONFIG already in the environment.",
                       SetBool(&d->override_tf_config), /*is_bool=*/true));
  flags->Add(
      AgentFlag("replicated-job", "NAME",
                "JobSet: this pod's replicated job, to split the hostname "
                "<jobset>-<replicatedjob>-<jobIndex>-<podIndex> without the "
                "downward-API labels.",
                SetString(&d->replicated_job)));
  flags->Add(AgentFlag("pod-labels-file", "PATH",
                       "A downward-API labels file (JobSet's "
                       "jobset.sigs.k8s.io/* labels; default "
                       "/etc/podinfo/labels; missing: none).",
                       SetString(&d->pod_labels_file)));
  flags->Add(AgentFlag(
      "rank-order-key", "VALUE",
      "c10d/etcd rounds: nodes with the same value (e.g. a rack or block "
      "label from the downward API) get adjacent ranks.",
      [options](absl::string_view v, absl::string_view) {
        const bool ok =
            !v.empty() && v.size() <= 63 &&
            std::all_of(v.begin(), v.end(), [](char c) {
              return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
            });
        if (!ok) {
          return absl::InvalidArgumentError(absl::StrCat(
              "'", v, "' is not a label value (1-63 of A-Z a-z 0-9 - _ .)"));
        }
        options->launch.rank_order_key = std::string(v);
        return absl::OkStatus();
      }));
  flags->Add(AgentFlag("mxnet-port", "PORT",
                       "DMLC_PS_ROOT_PORT (default 9091).",
                       SetInt(&d->mxnet_port, 1, 65535)));
}

}  // namespace distjob
