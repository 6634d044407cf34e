#include "discovery/identity.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace distjob {
namespace {

constexpr char kHowTo[] =
    "set --job-name/--task/--task-index (DISTJOB_JOB_NAME, DISTJOB_TASK, "
    "DISTJOB_TASK_INDEX)";

bool ParseIndex(absl::string_view s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(s, out);
}

// What the flags say, and the index Volcano sets.
absl::Status IdentityFromInputs(const IdentityInputs& in, const EnvMap& env,
                                ResolvedIdentity* out) {
  Identity& id = out->id;
  id.job = in.job;
  id.task = in.task;
  id.index = in.index;
  if (!id.job.empty()) out->sources["job"] = "flag --job-name";
  if (!id.task.empty()) out->sources["task"] = "flag --task";
  if (id.index >= 0) out->sources["index"] = "flag --task-index";
  for (const char* var : {"VC_TASK_INDEX", "VK_TASK_INDEX"}) {
    if (id.index >= 0) break;
    if (auto v = Lookup(env, var); v.has_value()) {
      if (!ParseIndex(*v, &id.index)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "env ", var, "='", *v, "' is not a non-negative integer"));
      }
      out->sources["index"] = absl::StrCat("env ", var);
    }
  }
  return absl::OkStatus();
}

// The tasks whose name `prefix` (<job>-<task>) may end in: the one given,
// else those the peers know, else its last '-' token.
std::vector<std::string> TasksOfPrefix(const std::string& prefix,
                                       const Identity& id,
                                       const Cluster& cluster) {
  std::vector<std::string> matches;
  if (!id.task.empty()) {
    if (absl::EndsWith(prefix, "-" + id.task)) matches.push_back(id.task);
  } else if (!cluster.tasks.empty()) {
    for (const std::string& task : cluster.TaskNames()) {
      if (!absl::EndsWith(prefix, "-" + task)) continue;
      if (!id.job.empty() && prefix != id.job + "-" + task) continue;
      matches.push_back(task);
    }
  } else {
    const size_t d = prefix.rfind('-');
    if (d != std::string::npos && d > 0 && d + 1 < prefix.size()) {
      matches.push_back(prefix.substr(d + 1));
    }
  }
  return matches;
}

// What the flags left out, from the hostname <job>-<task>-<index>.
absl::Status IdentityFromHostname(const IdentityInputs& in,
                                  const Cluster& cluster,
                                  ResolvedIdentity* out) {
  Identity& id = out->id;
  // The pod name is the first label; Volcano's /etc/hosts may hold the FQDN.
  const std::string host = in.hostname.substr(0, in.hostname.find('.'));
  const size_t dash = host.rfind('-');
  int host_index = -1;
  if (dash == std::string::npos ||
      !ParseIndex(absl::string_view(host).substr(dash + 1), &host_index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname '", in.hostname,
        "' is not <job>-<task>-<index> and the identity is incomplete "
        "(job='",
        id.job, "', task='", id.task, "', index=", id.index, "); ", kHowTo));
  }
  const std::string prefix = host.substr(0, dash);  // <job>-<task>
  const std::vector<std::string> matches = TasksOfPrefix(prefix, id, cluster);
  if (matches.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname '", in.hostname, "' does not end in -<task>-<index> for ",
        cluster.tasks.empty()
            ? std::string("any task")
            : absl::StrCat("a known task (",
                           absl::StrJoin(cluster.TaskNames(), ", "), ")"),
        "; ", kHowTo));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostname '", in.hostname, "' matches several tasks (",
        absl::StrJoin(matches, ", "), "); set --job-name or --task"));
  }
  if (id.task.empty()) {
    id.task = matches[0];
    out->sources["task"] = "hostname";
  }
  if (id.job.empty()) {
    id.job = prefix.substr(0, prefix.size() - id.task.size() - 1);
    out->sources["job"] = "hostname";
  }
  if (id.index < 0) {
    id.index = host_index;
    out->sources["index"] = "hostname";
  }
  return absl::OkStatus();
}

// The task is one the peers know, and the index one of its hosts.
absl::Status CheckAgainstPeers(const ResolvedIdentity& out,
                               const Cluster& cluster) {
  const Identity& id = out.id;
  auto source = [&out](const char* what) {
    auto it = out.sources.find(what);
    return it == out.sources.end() ? std::string() : it->second;
  };
  const TaskPeers* peers = cluster.Find(id.task);
  if (peers == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task '", id.task, "' (", source("task"), ") is not among the ",
        PeerSourceName(cluster.source), " tasks (",
        absl::StrJoin(cluster.TaskNames(), ", "), ")"));
  }
  if (id.index >= static_cast<int>(peers->hosts.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("task index ", id.index, " (", source("index"),
                     ") is beyond the ", peers->hosts.size(),
                     " hosts of task '", id.task, "' in ", peers->origin));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResolvedIdentity> ResolveIdentity(const IdentityInputs& in,
                                                 const EnvMap& env,
                                                 const Cluster& cluster) {
  ResolvedIdentity out;
  if (absl::Status s = IdentityFromInputs(in, env, &out); !s.ok()) return s;
  const Identity& id = out.id;
  if (id.job.empty() || id.task.empty() || id.index < 0) {
    if (absl::Status s = IdentityFromHostname(in, cluster, &out); !s.ok()) {
      return s;
    }
  }
  if (id.job.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no job name in hostname '", in.hostname, "'; ", kHowTo));
  }
  if (!cluster.tasks.empty()) {
    if (absl::Status s = CheckAgainstPeers(out, cluster); !s.ok()) return s;
  }
  return out;
}

}  // namespace distjob
