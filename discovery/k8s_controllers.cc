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

absl::StatusOr<std::optional<ControllerLayout>> JobSet(
    const ControllerInputs& in, const EnvMap& env) {
  const Sourced name = LabelValue(in, kJobSetNameLabel);
  Sourced rjob = LabelValue(in, kReplicatedJobLabel);
  if (name.value.empty() && in.replicated_job.empty()) return std::nullopt;
  if (!in.replicated_job.empty()) {
    if (!rjob.value.empty() && rjob.value != in.replicated_job) {
      return absl::InvalidArgumentError(
          absl::StrCat("--replicated-job ", in.replicated_job,
                       " disagrees with ", rjob.source, "='", rjob.value, "'"));
    }
    rjob = {in.replicated_job, "flag --replicated-job"};
  }
  // <jobset>-<replicatedjob>-<jobIndex>-<podIndex>: names may contain
  // '-', the two indexes may not.
  const std::string host = ShortHost(in.hostname);
  std::vector<std::string> parts = absl::StrSplit(host, '-');
  int host_job = -1, host_pod = -1;
  std::string prefix;  // <jobset>-<replicatedjob>
  if (parts.size() >= 4 && ParseCount(parts[parts.size() - 2], &host_job) &&
      ParseCount(parts.back(), &host_pod)) {
    prefix = host.substr(0, host.size() - parts.back().size() -
                                parts[parts.size() - 2].size() - 2);
  }
  const std::string hostname_form = absl::StrCat(
      "hostname '", in.hostname,
      "' (JobSet names pods <jobset>-<replicatedjob>-<jobIndex>-<podIndex>)");
  // The indexes come from the hostname: where it does not match and the
  // layout is the user's, the pod takes no place in the rank order rather
  // than fail (with hostNetwork the hostname is the node's).
  auto mismatch = [&](std::string message)
      -> absl::StatusOr<std::optional<ControllerLayout>> {
    if (!in.layout_given) return absl::InvalidArgumentError(message);
    ControllerLayout l;
    l.controller = "jobset";
    l.warning = absl::StrCat(message,
                             "; the layout is the user's, so this pod takes "
                             "no JobSet pod index");
    return l;
  };
  if (prefix.empty() || rjob.value.empty() ||
      !absl::EndsWith(prefix, "-" + rjob.value)) {
    return mismatch(absl::StrCat(
        hostname_form, " does not match ",
        rjob.value.empty() ? std::string("any replicated job")
                           : absl::StrCat(rjob.source, "='", rjob.value, "'"),
        "; mount the JobSet labels through the downward API or set "
        "--replicated-job"));
  }
  std::string jobset = prefix.substr(0, prefix.size() - rjob.value.size() - 1);
  if (!name.value.empty() && name.value != jobset) {
    return mismatch(absl::StrCat(hostname_form, " does not match ", name.source,
                                 "='", name.value, "'"));
  }
  // Each index given twice must agree; `*disagree` says how they do not.
  auto check = [&](const Sourced& s, int host_value, absl::string_view what,
                   std::string* disagree) -> absl::StatusOr<int> {
    if (s.value.empty()) return host_value;
    int v = 0;
    if (!ParseCount(s.value, &v)) return NotCount(s.source, s.value);
    if (v != host_value) {
      *disagree = absl::StrCat(hostname_form, " has ", what, " ", host_value,
                               ", which does not match ", s.source, "=", v);
    }
    return v;
  };
  std::string disagree;
  auto job_index =
      check(LabelValue(in, kJobIndexLabel), host_job, "job index", &disagree);
  if (!job_index.ok()) return job_index.status();
  if (!disagree.empty()) return mismatch(disagree);
  Sourced completion;
  if (auto c = Lookup(env, "JOB_COMPLETION_INDEX"); c.has_value()) {
    completion = {*c, "env JOB_COMPLETION_INDEX"};
  }
  auto pod_index = check(completion, host_pod, "pod index", &disagree);
  if (!pod_index.ok()) return pod_index.status();
  if (!disagree.empty()) return mismatch(disagree);
  const Sourced rjob_replicas = LabelValue(in, kReplicatedJobReplicasLabel);
  if (!rjob_replicas.value.empty()) {
    int r = 0;
    if (!ParseCount(rjob_replicas.value, &r)) {
      return NotCount(rjob_replicas.source, rjob_replicas.value);
    }
    if (*job_index >= r) {
      return absl::InvalidArgumentError(
          absl::StrCat(hostname_form, " has job index ", *job_index,
                       ", beyond ", rjob_replicas.source, "=", r));
    }
  }
  // Without the global index the replicated job is taken to be the only
  // one (its job index is then the global one).
  int global = *job_index;
  std::string global_source = "hostname (job index)";
  if (const Sourced g = LabelValue(in, kJobGlobalIndexLabel);
      !g.value.empty()) {
    if (!ParseCount(g.value, &global)) return NotCount(g.source, g.value);
    global_source = g.source;
  }
  int global_replicas = 0;
  const Sourced gr = LabelValue(in, kGlobalReplicasLabel);
  if (!gr.value.empty()) {
    if (!ParseCount(gr.value, &global_replicas) || global_replicas < 1) {
      return NotCount(gr.source, gr.value);
    }
    if (global >= global_replicas) {
      return absl::InvalidArgumentError(absl::StrCat(global_source, "=", global,
                                                     " is beyond ", gr.source,
                                                     "=", global_replicas));
    }
  }

  ControllerLayout l;
  l.controller = "jobset";
  l.pod_index = absl::StrCat(global, ".", *pod_index);
  l.pod_index_source = absl::StrCat(global_source, ", ",
                                    completion.value.empty()
                                        ? std::string("hostname (pod index)")
                                        : completion.source);
  if (in.layout_given) return l;

  // The node count: --nnodes, else one pod per Job of the JobSet.
  int nnodes = in.nnodes;
  int pods_per_job = 1;
  if (nnodes > 0) {
    if (global_replicas > 0) {
      if (nnodes % global_replicas != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--nnodes ", nnodes, " is not a multiple of ", gr.source, "=",
            global_replicas, " (every Job of the JobSet has as many pods)"));
      }
      pods_per_job = nnodes / global_replicas;
    } else if (global == 0) {
      pods_per_job = nnodes;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot place JobSet job ", global, " among --nnodes ",
                       nnodes, " without ", kGlobalReplicasLabel,
                       ": mount the JobSet labels through the downward API"));
    }
    l.size_source = "flag --nnodes";
  } else {
    if (global_replicas == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the JobSet's node count is unknown: set --nnodes (PET_NNODES) or "
          "mount the label ",
          kGlobalReplicasLabel, " through the downward API"));
    }
    if (*pod_index > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          hostname_form, " has pod index ", *pod_index,
          ": the JobSet's Jobs have several pods; set --nnodes (PET_NNODES)"));
    }
    nnodes = global_replicas;
    l.size_source = absl::StrCat(gr.source, " (one pod per Job)");
  }
  if (*pod_index >= pods_per_job) {
    return absl::InvalidArgumentError(absl::StrCat(
        hostname_form, " has pod index ", *pod_index, ", beyond the ",
        pods_per_job, " pods per Job of --nnodes ", nnodes));
  }
  l.fixed = true;
  l.nnodes = nnodes;
  l.node_rank = global * pods_per_job + *pod_index;
  l.rank_source = l.pod_index_source;
  // The coordinator: JobSet's spec.coordinator when set, else pod 0 of
  // job 0 of this replicated job when it is the first one (its global
  // index offset is 0), under the JobSet's subdomain (its name unless the
  // hostname says otherwise).
  if (const Sourced c = LabelValue(in, kCoordinatorLabel); !c.value.empty()) {
    l.master_addr = c.value;
    l.master_source = c.source;
  } else if (global == *job_index) {
    const std::string sub = Subdomain(in.hostname);
    l.master_addr = absl::StrCat(prefix, "-0-0.", sub.empty() ? jobset : sub);
    l.master_source =
        absl::StrCat("JobSet pod 0 of job 0 of replicated job ", rjob.value);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "replicated job '", rjob.value, "' is not the JobSet's first (",
        global_source, "=", global, ", job index ", *job_index,
        "): set the JobSet's spec.coordinator (label ", kCoordinatorLabel,
        ") or --master-addr"));
  }
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
