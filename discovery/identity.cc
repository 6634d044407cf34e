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

}  // namespace

absl::StatusOr<ResolvedIdentity> ResolveIdentity(const IdentityInputs& in,
                                                 const EnvMap& env,
                                                 const Cluster& cluster) {
  ResolvedIdentity out;
  Identity& id = out.id;
  id.job = in.job;
  id.task = in.task;
  id.index = in.index;
  if (!id.job.empty()) out.sources["job"] = "flag --job-name";
  if (!id.task.empty()) out.sources["task"] = "flag --task";
  if (id.index >= 0) out.sources["index"] = "flag --task-index";
  for (const char* var : {"VC_TASK_INDEX", "VK_TASK_INDEX"}) {
    if (id.index >= 0) break;
    if (auto v = Lookup(env, var); v.has_value()) {
      if (!ParseIndex(*v, &id.index)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "env ", var, "='", *v, "' is not a non-negative integer"));
      }
      out.sources["index"] = absl::StrCat("env ", var);
    }
  }

  // The pod name is the first label; Volcano's /etc/hosts may hold the FQDN.
  const std::string host = in.hostname.substr(0, in.hostname.find('.'));
  if (id.job.empty() || id.task.empty() || id.index < 0) {
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
    std::vector<std::string> matches;
    std::string match_job;
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
      out.sources["task"] = "hostname";
    }
    if (id.job.empty()) {
      id.job = prefix.substr(0, prefix.size() - id.task.size() - 1);
      out.sources["job"] = "hostname";
    }
    if (id.index < 0) {
      id.index = host_index;
      out.sources["index"] = "hostname";
    }
  }
  if (id.job.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no job name in hostname '", in.hostname, "'; ", kHowTo));
  }
  if (!cluster.tasks.empty()) {
    const TaskPeers* peers = cluster.Find(id.task);
    if (peers == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task '", id.task, "' (", out.sources["task"], ") is not among the ",
          PeerSourceName(cluster.source), " tasks (",
          absl::StrJoin(cluster.TaskNames(), ", "), ")"));
    }
    if (id.index >= static_cast<int>(peers->hosts.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("task index ", id.index, " (", out.sources["index"],
                       ") is beyond the ", peers->hosts.size(),
                       " hosts of task '", id.task, "' in ", peers->origin));
    }
  }
  return out;
}

}  // namespace distjob
