#include "discovery/k8s_controllers.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace distjob {
namespace {

// A counter or index from the controller: plain decimal digits.
bool ParseCount(absl::string_view s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(s, out);
}

absl::Status NotCount(absl::string_view what, absl::string_view value) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, "='", value, "' is not a non-negative integer"));
}

// The pod's first name label and, for a dotted hostname, the second (the
// subdomain: the headless Service the controller names the pods under).
std::string ShortHost(const std::string& host) {
  return host.substr(0, host.find('.'));
}
std::string Subdomain(const std::string& host) {
  const size_t dot = host.find('.');
  if (dot == std::string::npos) return "";
  const size_t end = host.find('.', dot + 1);
  return host.substr(dot + 1, end == std::string::npos ? end : end - dot - 1);
}

// `value` from `label`, or from env `var`; "" when neither.
struct Sourced {
  std::string value;
  std::string source;
};
Sourced LabelValue(const ControllerInputs& in, const char* label) {
  auto it = in.labels.find(label);
  if (it == in.labels.end()) return {};
  return {it->second,
          absl::StrCat("label ", label, " (", in.labels_origin, ")")};
}

absl::StatusOr<std::optional<ControllerLayout>> Lws(const ControllerInputs& in,
                                                    const EnvMap& env) {
  const auto leader = Lookup(env, "LWS_LEADER_ADDRESS");
  const auto size = Lookup(env, "LWS_GROUP_SIZE");
  const auto index = Lookup(env, "LWS_WORKER_INDEX");
  if (!leader && !size && !index) return std::nullopt;
  if (!leader || !size || !index) {
    std::vector<std::string> missing, set;
    const std::pair<const char*, bool> vars[] = {
        {"LWS_LEADER_ADDRESS", leader.has_value()},
        {"LWS_GROUP_SIZE", size.has_value()},
        {"LWS_WORKER_INDEX", index.has_value()}};
    for (const auto& [name, present] : vars) {
      (present ? set : missing).push_back(name);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "LeaderWorkerSet variables incomplete: env ",
        absl::StrJoin(missing, " and "), missing.size() == 1 ? " is" : " are",
        " missing while ", absl::StrJoin(set, " and "),
        set.size() == 1 ? " is" : " are",
        " set; the LeaderWorkerSet controller sets all three"));
  }
  int n = 0, i = 0;
  if (!ParseCount(*size, &n) || n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env LWS_GROUP_SIZE='", *size, "' is not a positive integer"));
  }
  if (!ParseCount(*index, &i)) return NotCount("env LWS_WORKER_INDEX", *index);
  if (i >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env LWS_WORKER_INDEX=", i, " is beyond env LWS_GROUP_SIZE=", n,
        " (indexes 0-", n - 1, ")"));
  }
  if (in.nnodes > 0 && in.nnodes != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes ", in.nnodes, " disagrees with env LWS_GROUP_SIZE=", n));
  }
  if (leader->empty()) {
    return absl::InvalidArgumentError("env LWS_LEADER_ADDRESS is empty");
  }
  ControllerLayout l;
  l.controller = "lws";
  l.fixed = !in.layout_given;
  l.node_rank = i;
  l.nnodes = n;
  l.master_addr = *leader;
  l.rank_source = "env LWS_WORKER_INDEX (LeaderWorkerSet)";
  l.size_source = "env LWS_GROUP_SIZE (LeaderWorkerSet)";
  l.master_source = "env LWS_LEADER_ADDRESS (LeaderWorkerSet)";
  l.pod_index = absl::StrCat(i);
  l.pod_index_source = "env LWS_WORKER_INDEX";
  return l;
}

// Kubeflow Trainer v2's torch plugin runs the TrainJob on a JobSet and
// sets torchrun's own PET_* (read by the torchrun flags already); here only
// checked against each other and against the completion index.
absl::StatusOr<std::optional<ControllerLayout>> TrainerV2(
    const ControllerInputs&, const EnvMap& env) {
  // An Indexed Job may set PET_NNODES itself; the node rank from the
  // completion index is the plugin's mark.
  const auto nnodes = Lookup(env, "PET_NNODES");
  const auto completion = Lookup(env, "JOB_COMPLETION_INDEX");
  if (!nnodes || !completion || !Lookup(env, "PET_NODE_RANK")) {
    return std::nullopt;
  }
  ControllerLayout l;
  l.controller = "trainer-v2";
  int c = 0;
  if (!ParseCount(*completion, &c)) {
    return NotCount("env JOB_COMPLETION_INDEX", *completion);
  }
  int n = 0;
  if (ParseCount(*nnodes, &n) && c >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "env JOB_COMPLETION_INDEX=", c, " is beyond env PET_NNODES=", n,
        " (indexes 0-", n - 1, ")"));
  }
  {
    const std::string rank = *Lookup(env, "PET_NODE_RANK");  // checked above
    int r = 0;
    if (!ParseCount(rank, &r)) return NotCount("env PET_NODE_RANK", rank);
    if (r != c) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env PET_NODE_RANK=", r, " disagrees with env JOB_COMPLETION_INDEX=",
          c, " (Trainer v2 sets the node rank from the index)"));
    }
  }
  l.pod_index = absl::StrCat(c);
  l.pod_index_source = "env JOB_COMPLETION_INDEX (Kubeflow Trainer v2)";
  return l;
}

// The replicated job: the label, or --replicated-job where the label is
// absent or agrees.
absl::StatusOr<Sourced> ReplicatedJob(const ControllerInputs& in) {
  const Sourced rjob = LabelValue(in, kReplicatedJobLabel);
  if (in.replicated_job.empty()) return rjob;
  if (!rjob.value.empty() && rjob.value != in.replicated_job) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replicated-job ", in.replicated_job, " disagrees with ",
                     rjob.source, "='", rjob.value, "'"));
  }
  return Sourced{in.replicated_job, "flag --replicated-job"};
}

// A JobSet pod's place: the indexes in its hostname
// <jobset>-<replicatedjob>-<jobIndex>-<podIndex>, checked against the
// JobSet's labels, then (for a layout that is not the user's) its node
// rank, the node count and the coordinator. Each step is called once, in
// order, and returns a status naming what disagrees.
class JobSetPod {
 public:
  JobSetPod(const ControllerInputs& in, const EnvMap& env, Sourced rjob)
      : in_(in),
        env_(env),
        rjob_(std::move(rjob)),
        host_(ShortHost(in.hostname)),
        hostname_form_(absl::StrCat("hostname '", in.hostname,
                                    "' (JobSet names pods "
                                    "<jobset>-<replicatedjob>-<jobIndex>-"
                                    "<podIndex>)")) {
    // Names may contain '-', the two indexes may not.
    std::vector<std::string> parts = absl::StrSplit(host_, '-');
    if (parts.size() >= 4 && ParseCount(parts[parts.size() - 2], &host_job_) &&
        ParseCount(parts.back(), &host_pod_)) {
      prefix_ = host_.substr(0, host_.size() - parts.back().size() -
                                    parts[parts.size() - 2].size() - 2);
    }
  }

  // The indexes come from the hostname: where it does not match and the
  // layout is the user's, the pod takes no place in the rank order rather
  // than fail (with hostNetwork the hostname is the node's).
  absl::StatusOr<std::optional<ControllerLayout>> Mismatch(
      std::string message) const {
    if (!in_.layout_given) return absl::InvalidArgumentError(message);
    ControllerLayout l;
    l.controller = "jobset";
    l.warning = absl::StrCat(message,
                             "; the layout is the user's, so this pod takes "
                             "no JobSet pod index");
    return l;
  }

  // How the hostname does not match the replicated job and the JobSet's
  // name; "" when it does.
  std::string MatchNames(const Sourced& name) {
    if (prefix_.empty() || rjob_.value.empty() ||
        !absl::EndsWith(prefix_, "-" + rjob_.value)) {
      return absl::StrCat(
          hostname_form_, " does not match ",
          rjob_.value.empty()
              ? std::string("any replicated job")
              : absl::StrCat(rjob_.source, "='", rjob_.value, "'"),
          "; mount the JobSet labels through the downward API or set "
          "--replicated-job");
    }
    jobset_ = prefix_.substr(0, prefix_.size() - rjob_.value.size() - 1);
    if (!name.value.empty() && name.value != jobset_) {
      return absl::StrCat(hostname_form_, " does not match ", name.source, "='",
                          name.value, "'");
    }
    return "";
  }

  // The job and pod indexes, each from the hostname and checked against
  // its label or variable; `*disagree` says how they do not match.
  absl::Status ReadIndexes(std::string* disagree) {
    auto job_index = Check(LabelValue(in_, kJobIndexLabel), host_job_,
                           "job index", disagree);
    if (!job_index.ok()) return job_index.status();
    if (!disagree->empty()) return absl::OkStatus();
    job_index_ = *job_index;
    if (auto c = Lookup(env_, "JOB_COMPLETION_INDEX"); c.has_value()) {
      completion_ = {*c, "env JOB_COMPLETION_INDEX"};
    }
    auto pod_index = Check(completion_, host_pod_, "pod index", disagree);
    if (!pod_index.ok()) return pod_index.status();
    pod_index_ = *pod_index;
    return absl::OkStatus();
  }

  // The Job's index among all the JobSet's Jobs, and their count when the
  // labels say it.
  absl::Status ReadGlobalIndex() {
    const Sourced rjob_replicas = LabelValue(in_, kReplicatedJobReplicasLabel);
    if (!rjob_replicas.value.empty()) {
      int r = 0;
      if (!ParseCount(rjob_replicas.value, &r)) {
        return NotCount(rjob_replicas.source, rjob_replicas.value);
      }
      if (job_index_ >= r) {
        return absl::InvalidArgumentError(
            absl::StrCat(hostname_form_, " has job index ", job_index_,
                         ", beyond ", rjob_replicas.source, "=", r));
      }
    }
    // Without the global index the replicated job is taken to be the only
    // one (its job index is then the global one).
    global_ = job_index_;
    if (const Sourced g = LabelValue(in_, kJobGlobalIndexLabel);
        !g.value.empty()) {
      if (!ParseCount(g.value, &global_)) return NotCount(g.source, g.value);
      global_source_ = g.source;
    }
    replicas_ = LabelValue(in_, kGlobalReplicasLabel);
    if (replicas_.value.empty()) return absl::OkStatus();
    if (!ParseCount(replicas_.value, &global_replicas_) ||
        global_replicas_ < 1) {
      return NotCount(replicas_.source, replicas_.value);
    }
    if (global_ >= global_replicas_) {
      return absl::InvalidArgumentError(
          absl::StrCat(global_source_, "=", global_, " is beyond ",
                       replicas_.source, "=", global_replicas_));
    }
    return absl::OkStatus();
  }

  // The pod's place in the dynamic rank order: <global>.<pod index>.
  ControllerLayout Indexed() const {
    ControllerLayout l;
    l.controller = "jobset";
    l.pod_index = absl::StrCat(global_, ".", pod_index_);
    l.pod_index_source = absl::StrCat(global_source_, ", ",
                                      completion_.value.empty()
                                          ? std::string("hostname (pod index)")
                                          : completion_.source);
    return l;
  }

  // The node count: --nnodes, else one pod per Job of the JobSet; and the
  // node rank from it.
  absl::Status PlaceNode(ControllerLayout* l) const {
    int nnodes = in_.nnodes;
    int pods_per_job = 1;
    if (nnodes > 0) {
      if (global_replicas_ > 0) {
        if (nnodes % global_replicas_ != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("--nnodes ", nnodes, " is not a multiple of ",
                           replicas_.source, "=", global_replicas_,
                           " (every Job of the JobSet has as many pods)"));
        }
        pods_per_job = nnodes / global_replicas_;
      } else if (global_ == 0) {
        pods_per_job = nnodes;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot place JobSet job ", global_, " among --nnodes ", nnodes,
            " without ", kGlobalReplicasLabel,
            ": mount the JobSet labels through the downward API"));
      }
      l->size_source = "flag --nnodes";
    } else {
      if (global_replicas_ == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the JobSet's node count is unknown: set --nnodes (PET_NNODES) or "
            "mount the label ",
            kGlobalReplicasLabel, " through the downward API"));
      }
      if (pod_index_ > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(hostname_form_, " has pod index ", pod_index_,
                         ": the JobSet's Jobs have several pods; set --nnodes "
                         "(PET_NNODES)"));
      }
      nnodes = global_replicas_;
      l->size_source = absl::StrCat(replicas_.source, " (one pod per Job)");
    }
    if (pod_index_ >= pods_per_job) {
      return absl::InvalidArgumentError(absl::StrCat(
          hostname_form_, " has pod index ", pod_index_, ", beyond the ",
          pods_per_job, " pods per Job of --nnodes ", nnodes));
    }
    l->fixed = true;
    l->nnodes = nnodes;
    l->node_rank = global_ * pods_per_job + pod_index_;
    l->rank_source = l->pod_index_source;
    return absl::OkStatus();
  }

  // The coordinator: JobSet's spec.coordinator when set, else pod 0 of
  // job 0 of this replicated job when it is the first one (its global
  // index offset is 0), under the JobSet's subdomain (its name unless the
  // hostname says otherwise).
  absl::Status FindCoordinator(ControllerLayout* l) const {
    if (const Sourced c = LabelValue(in_, kCoordinatorLabel);
        !c.value.empty()) {
      l->master_addr = c.value;
      l->master_source = c.source;
      return absl::OkStatus();
    }
    if (global_ != job_index_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicated job '", rjob_.value, "' is not the JobSet's first (",
          global_source_, "=", global_, ", job index ", job_index_,
          "): set the JobSet's spec.coordinator (label ", kCoordinatorLabel,
          ") or --master-addr"));
    }
    const std::string sub = Subdomain(in_.hostname);
    l->master_addr =
        absl::StrCat(prefix_, "-0-0.", sub.empty() ? jobset_ : sub);
    l->master_source =
        absl::StrCat("JobSet pod 0 of job 0 of replicated job ", rjob_.value);
    return absl::OkStatus();
  }

 private:
  // An index given twice must agree; `*disagree` says how they do not.
  absl::StatusOr<int> Check(const Sourced& s, int host_value,
                            absl::string_view what,
                            std::string* disagree) const {
    if (s.value.empty()) return host_value;
    int v = 0;
    if (!ParseCount(s.value, &v)) return NotCount(s.source, s.value);
    if (v != host_value) {
      *disagree = absl::StrCat(hostname_form_, " has ", what, " ", host_value,
                               ", which does not match ", s.source, "=", v);
    }
    return v;
  }

  const ControllerInputs& in_;
  const EnvMap& env_;
  const Sourced rjob_;
  const std::string host_;
  const std::string hostname_form_;
  int host_job_ = -1, host_pod_ = -1;
  std::string prefix_;  // <jobset>-<replicatedjob>
  std::string jobset_;
  int job_index_ = 0, pod_index_ = 0;
  Sourced completion_;
  int global_ = 0;
  std::string global_source_ = "hostname (job index)";
  Sourced replicas_;  // the JobSet's global replicas label
  int global_replicas_ = 0;
};

absl::StatusOr<std::optional<ControllerLayout>> JobSet(
    const ControllerInputs& in, const EnvMap& env) {
  const Sourced name = LabelValue(in, kJobSetNameLabel);
  if (name.value.empty() && in.replicated_job.empty()) return std::nullopt;
  auto rjob = ReplicatedJob(in);
  if (!rjob.ok()) return rjob.status();
  JobSetPod pod(in, env, *std::move(rjob));
  if (std::string m = pod.MatchNames(name); !m.empty()) {
    return pod.Mismatch(std::move(m));
  }
  std::string disagree;
  if (absl::Status s = pod.ReadIndexes(&disagree); !s.ok()) return s;
  if (!disagree.empty()) return pod.Mismatch(std::move(disagree));
  if (absl::Status s = pod.ReadGlobalIndex(); !s.ok()) return s;
  ControllerLayout l = pod.Indexed();
  if (in.layout_given) return l;
  if (absl::Status s = pod.PlaceNode(&l); !s.ok()) return s;
  if (absl::Status s = pod.FindCoordinator(&l); !s.ok()) return s;
  return l;
}

// A JobSet's pods have JOB_COMPLETION_INDEX too. Without the JobSet's
// labels one would pass for a plain Indexed Job and take its pod index in
// its own Job for the node rank: each Job would elect its own master. Its
// name without the pod index is "<subdomain>-<replicated job>-<job index>".
bool LooksLikeJobSetPod(const std::string& stem, const std::string& sub) {
  if (!absl::StartsWith(stem, absl::StrCat(sub, "-"))) return false;
  const size_t dash = stem.rfind('-');
  int job_index = 0;
  return dash != std::string::npos && dash > sub.size() + 1 &&
         ParseCount(absl::string_view(stem).substr(dash + 1), &job_index);
}

absl::StatusOr<std::optional<ControllerLayout>> IndexedJob(
    const ControllerInputs& in, const EnvMap& env) {
  const auto completion = Lookup(env, "JOB_COMPLETION_INDEX");
  if (!completion) return std::nullopt;
  int index = 0;
  if (!ParseCount(*completion, &index)) {
    return NotCount("env JOB_COMPLETION_INDEX", *completion);
  }
  ControllerLayout l;
  l.controller = "indexed-job";
  l.pod_index = absl::StrCat(index);
  l.pod_index_source = "env JOB_COMPLETION_INDEX (Indexed Job)";
  // Without --nnodes the Job's size is unknown (the controller does not
  // pass its completions): the pod only takes its place in the rank order.
  const bool layout_used = !in.layout_given && in.nnodes > 0;
  // The Job controller names an Indexed Job's pods <job>-<index>. Where
  // the layout is not derived from it, a hostname that is not (with
  // hostNetwork it is the node's) is only a warning: the index is the
  // controller's variable either way.
  const std::string host = ShortHost(in.hostname);
  const size_t dash = host.rfind('-');
  int host_index = -1;
  std::string mismatch;
  if (dash == std::string::npos || dash == 0 ||
      !ParseCount(absl::string_view(host).substr(dash + 1), &host_index)) {
    mismatch = absl::StrCat("hostname '", in.hostname,
                            "' is not <job>-<index> as an Indexed "
                            "Job's pods are (env JOB_COMPLETION_INDEX=",
                            index, ")");
  } else if (host_index != index) {
    mismatch =
        absl::StrCat("hostname '", in.hostname, "' has index ", host_index,
                     ", which does not match env JOB_COMPLETION_INDEX=", index);
  }
  if (!mismatch.empty()) {
    if (layout_used) return absl::InvalidArgumentError(mismatch);
    l.warning = absl::StrCat(mismatch, "; the pod index is taken from env");
  }
  if (!layout_used) return l;
  if (index >= in.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("env JOB_COMPLETION_INDEX=", index, " is beyond --nnodes ",
                     in.nnodes, " (indexes 0-", in.nnodes - 1, ")"));
  }
  const std::string sub = Subdomain(in.hostname);
  if (sub.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname '", in.hostname,
        "' names no subdomain: give the Indexed Job's pods a subdomain (a "
        "headless Service) so that <job>-0.<subdomain> resolves, or set "
        "--master-addr"));
  }
  if (LooksLikeJobSetPod(host.substr(0, dash), sub)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname '", in.hostname,
        "' is shaped as a JobSet pod's (<jobset>-<replicated job>-<job "
        "index>-<pod index>, subdomain the JobSet's name) but no JobSet "
        "labels were found: mount them at --pod-labels-file or set "
        "--replicated-job; for a plain Indexed Job so named, set "
        "--master-addr and --node-rank"));
  }
  l.fixed = true;
  l.node_rank = index;
  l.nnodes = in.nnodes;
  l.master_addr = absl::StrCat(host.substr(0, dash), "-0.", sub);
  l.rank_source = l.pod_index_source;
  l.size_source = "flag --nnodes";
  l.master_source = "Indexed Job pod <job>-0.<subdomain>";
  return l;
}

}  // namespace

absl::StatusOr<std::optional<ControllerLayout>> DetectController(
    const ControllerInputs& in, const EnvMap& env) {
  // Trainer v2 and LWS say who they are in their own variables; a Trainer
  // v2 pod is also a JobSet pod, and a JobSet pod an Indexed Job's.
  for (auto detect : {TrainerV2, Lws, JobSet, IndexedJob}) {
    auto found = detect(in, env);
    if (!found.ok() || found->has_value()) return found;
  }
  return std::nullopt;
}

absl::StatusOr<std::map<std::string, std::string>> ParseDownwardApiLabels(
    const std::string& text, const std::string& origin) {
  std::map<std::string, std::string> labels;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const size_t eq = line.find('=');
    absl::string_view key = line.substr(0, eq == line.npos ? 0 : eq);
    absl::string_view value =
        eq == line.npos ? absl::string_view() : line.substr(eq + 1);
    // Label values are [A-Za-z0-9._-]: the quotes are all there is to undo.
    if (key.empty() || !absl::ConsumePrefix(&value, "\"") ||
        !absl::ConsumeSuffix(&value, "\"") || absl::StrContains(value, '"') ||
        absl::StrContains(value, '\\')) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": line '", line,
                       "' is not key=\"value\" (a downward-API labels file)"));
    }
    labels[std::string(key)] = std::string(value);
  }
  return labels;
}

}  // namespace distjob
