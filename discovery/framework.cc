#include "discovery/framework.h"

#include "absl/strings/str_cat.h"

namespace distjob {

absl::StatusOr<Framework> ParseFramework(absl::string_view text) {
  for (Framework f :
       {Framework::kAuto, Framework::kPyTorch, Framework::kTensorFlow,
        Framework::kMXNet, Framework::kMpi, Framework::kNone}) {
    if (text == FrameworkName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is not one of auto, pytorch, tensorflow, mxnet, none"));
}

const char* FrameworkName(Framework framework) {
  switch (framework) {
    case Framework::kAuto:
      return "auto";
    case Framework::kPyTorch:
      return "pytorch";
    case Framework::kTensorFlow:
      return "tensorflow";
    case Framework::kMXNet:
      return "mxnet";
    case Framework::kMpi:
      return "mpi";
    case Framework::kNone:
      return "none";
  }
  return "auto";
}

std::map<std::string, std::string> DefaultTfRoles() {
  return {{"ps", "ps"},
          {"worker", "worker"},
          {"chief", "chief"},
          {"evaluator", "evaluator"}};
}

FrameworkChoice ChooseFramework(
    Framework requested, const Cluster& cluster, const EnvMap& env,
    const std::map<std::string, std::string>& tf_roles) {
  if (requested != Framework::kAuto) {
    return {FrameworkName(requested), "flag --framework"};
  }
  if (cluster.Find("scheduler") || cluster.Find("server")) {
    return {"mxnet", "a scheduler/server task"};
  }
  for (const char* role : {"ps", "chief", "evaluator"}) {
    auto it = tf_roles.find(role);
    if (it != tf_roles.end() && cluster.Find(it->second)) {
      return {"tensorflow", absl::StrCat("a '", it->second, "' task")};
    }
  }
  if (cluster.Find("master")) return {"pytorch", "a 'master' task"};
  for (const char* var : {"PET_NNODES", "PET_RDZV_ENDPOINT"}) {
    if (Lookup(env, var)) {
      return {"pytorch", absl::StrCat("env ", var, " (Kubeflow PyTorchJob)")};
    }
  }
  if (Lookup(env, "TF_CONFIG")) return {"tensorflow", "env TF_CONFIG"};
  if (Lookup(env, "DMLC_ROLE")) return {"mxnet", "env DMLC_ROLE"};
  // Workers alone are how MultiWorkerMirroredStrategy runs; Volcano's
  // tensorflow plugin gives them a TF_CONFIG too. Any other task name
  // leaves the job unnamed.
  if (auto it = tf_roles.find("worker"); it != tf_roles.end() &&
                                         cluster.tasks.size() == 1 &&
                                         cluster.tasks[0].task == it->second) {
    return {"tensorflow",
            absl::StrCat("workers only ('", it->second,
                         "' tasks: MultiWorkerMirroredStrategy)")};
  }
  return {"none", cluster.tasks.empty()
                      ? "no peers found"
                      : "no framework-specific task names (set --framework)"};
}

}  // namespace distjob
