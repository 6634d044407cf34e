#include "launchers/mxnet.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"

namespace distjob {
namespace {

int Count(const Cluster& cluster, const char* task) {
  const TaskPeers* t = cluster.Find(task);
  return t == nullptr ? 0 : static_cast<int>(t->hosts.size());
}

}  // namespace

absl::StatusOr<LauncherEnv> MXNetEnv(const Identity& self,
                                     const Cluster& cluster,
                                     const MXNetOptions& options) {
  const int schedulers = Count(cluster, "scheduler");
  const int servers = Count(cluster, "server");
  const int workers = Count(cluster, "worker");
  const std::string layout = absl::StrCat(
      "scheduler=", schedulers, ", server=", servers, ", worker=", workers,
      " from ", PeerSourceName(cluster.source), " peers");
  for (const TaskPeers& t : cluster.tasks) {
    if (t.task != "scheduler" && t.task != "server" && t.task != "worker") {
      return absl::InvalidArgumentError(absl::StrCat(
          "MXNet task '", t.task, "' is not one of scheduler, server, worker (",
          t.origin, ")"));
    }
  }
  LauncherEnv out;
  if (schedulers == 0 && servers == 0) {
    if (workers > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MXNet local mode allows at most one worker, got ", layout,
          "; add one scheduler and at least one server for distributed "
          "mode"));
    }
    return out;
  }
  if (schedulers != 1 || servers < 1 || workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MXNet distributed mode needs exactly one scheduler, at least one "
        "server and one worker, got ",
        layout));
  }
  const std::string source =
      absl::StrCat(PeerSourceName(cluster.source), " peers");
  const std::string port = absl::StrCat(options.port);
  out.Set("DMLC_ROLE", self.task, "task name");
  const TaskPeers* scheduler = cluster.Find("scheduler");
  out.Set("DMLC_PS_ROOT_URI", scheduler->hosts[0], scheduler->origin);
  out.Set("DMLC_PS_ROOT_PORT", port, "flag --mxnet-port or default");
  out.Set("DMLC_NUM_SERVER", absl::StrCat(servers),
          cluster.Find("server")->origin);
  out.Set("DMLC_NUM_WORKER", absl::StrCat(workers),
          cluster.Find("worker")->origin);
  out.Set("DMLC_USE_KUBERNETES", "1", "default");
  if (self.task == "worker") {
    out.Set("DMLC_WORKER_ID", absl::StrCat(self.index), "task index");
  }
  // Kubeflow's shape: a Go map, so roles in sorted order (tasks already are).
  Json cluster_json = Json::object(), labels = Json::object();
  for (const TaskPeers& t : cluster.tasks) {
    Json hosts = Json::array();
    for (const std::string& h : t.hosts) {
      hosts.push_back({{"url", h}, {"port", options.port}});
    }
    cluster_json[t.task] = std::move(hosts);
    labels[t.task] = "";
  }
  Json config;
  config["cluster"] = std::move(cluster_json);
  config["labels"] = std::move(labels);
  config["task"] = {{"type", self.task}, {"index", self.index}};
  out.Set("MX_CONFIG", DumpJson(config), source);
  return out;
}

}  // namespace distjob
