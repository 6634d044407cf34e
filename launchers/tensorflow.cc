#include "launchers/tensorflow.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/json.h"

namespace distjob {
namespace {

std::string HostPort(const std::string& host, int port) {
  // A bare IPv6 literal needs brackets before the port.
  if (host.find(':') != std::string::npos && host[0] != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

Json HostList(const TaskPeers& peers, int port) {
  Json items = Json::array();
  for (const std::string& h : peers.hosts) items.push_back(HostPort(h, port));
  return items;
}

}  // namespace

absl::Status ParseTfRoles(absl::string_view spec,
                          std::map<std::string, std::string>* roles) {
  for (absl::string_view item :
       absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string role(kv.first);
    if (!roles->count(role) || kv.second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", item,
          "' is not ROLE=TASK with ROLE one of ps, worker, chief, evaluator "
          "(e.g. ps=ps-server,worker=trainer)"));
    }
    (*roles)[role] = std::string(kv.second);
  }
  return absl::OkStatus();
}

absl::StatusOr<LauncherEnv> TensorFlowEnv(const Identity& self,
                                          const Cluster& cluster,
                                          const TensorFlowOptions& options,
                                          const EnvMap& env) {
  LauncherEnv out;
  if (auto existing = Lookup(env, "TF_CONFIG"); existing.has_value()) {
    auto parsed = ParseJson(*existing, "env TF_CONFIG");
    if (!parsed.ok() || !parsed->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env TF_CONFIG is not a JSON object: '", existing->substr(0, 80),
          "'; fix it, unset it, or pass "
          "--override-tf-config"));
    }
    if (!options.override_existing) return out;
  }
  // Standalone: neither operator writes TF_CONFIG for a single replica.
  if (cluster.TotalHosts() <= 1) return out;

  const bool kubeflow = cluster.source == PeerSource::kKubeflow;
  Json entries = Json::object();
  std::vector<std::string> origins;
  std::string task_type = self.task;
  if (kubeflow) {
    // TFJob: lower-case replica types as given, in Go's sorted map order;
    // master stays master (the controller does not translate it).
    for (const TaskPeers& t : cluster.tasks) {
      if (t.task == "evaluator" && !options.include_evaluator) continue;
      entries[t.task] = HostList(t, options.port);
      origins.push_back(t.origin);
    }
  } else {
    const std::map<std::string, std::string>& roles = options.roles;
    std::string chief_task = roles.at("chief");
    if (!cluster.Find(chief_task) && cluster.Find("master")) {
      chief_task = "master";
    }
    const std::pair<const char*, std::string> order[] = {
        {"ps", roles.at("ps")},
        {"worker", roles.at("worker")},
        {"chief", chief_task},
        {"evaluator", roles.at("evaluator")}};
    for (const auto& [role, task] : order) {
      if (self.task == task) task_type = role;
      if (std::string(role) == "evaluator" && !options.include_evaluator) {
        continue;
      }
      const TaskPeers* t = cluster.Find(task);
      if (t == nullptr) continue;
      entries[role] = HostList(*t, options.port);
      origins.push_back(t->origin);
    }
  }
  Json config;
  config["cluster"] = std::move(entries);
  config["task"] = {{"type", task_type}, {"index", self.index}};
  if (kubeflow) config["environment"] = "cloud";
  out.Set("TF_CONFIG", DumpJson(config),
          absl::StrCat(absl::StrJoin(origins, ", "), "; port ", options.port));
  return out;
}

}  // namespace distjob
