// The job's peers as the operators describe them: task (role) names with
// their hosts in index order. Sources: Volcano's svc plugin (/etc/volcano
// host files, VC_<TASK>_HOSTS/NUM), Kubeflow's naming (<job>-<type>-<i>
// from replica counts) and a static list (--peers or a hostfile).
#ifndef DISTJOB_DISCOVERY_PEERS_H_
#define DISTJOB_DISCOVERY_PEERS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/environment.h"

namespace distjob {

enum class PeerSource { kNone, kVolcano, kKubeflow, kStatic };
const char* PeerSourceName(PeerSource source);

struct TaskPeers {
  std::string task;
  std::vector<std::string> hosts;  // index = position
  std::string origin;              // where the list came from, for --explain
};

// Who this pod is in the job.
struct Identity {
  std::string job;
  std::string task;
  int index = -1;
};

struct Cluster {
  PeerSource source = PeerSource::kNone;
  std::vector<TaskPeers> tasks;  // sorted by task name

  const TaskPeers* Find(absl::string_view task) const;
  int TotalHosts() const;
  std::vector<std::string> TaskNames() const;
};

// Volcano: the file name of a task's host list ('-' becomes '_') and the
// env variable prefix (upper-cased, '-' becomes '_').
std::string VolcanoHostFile(absl::string_view task);
std::string VolcanoEnvTask(absl::string_view task);

// Reads `dir`/*.host and VC_<TASK>_HOSTS/VC_<TASK>_NUM. Files win over env
// (the mounted ConfigMap follows job updates; env is fixed at start).
// Returns a cluster with source kNone when neither exists. An empty or
// unreadable host file, a duplicate host, or a NUM that disagrees with the
// host list is InvalidArgument naming the file or variable.
absl::StatusOr<Cluster> ReadVolcanoPeers(const std::string& dir,
                                         const EnvMap& env);

// Kubeflow: "worker=4,ps=2" into hosts <job>-<type>-<i>[.<ns>.svc[.<dom>]].
absl::StatusOr<Cluster> KubeflowPeers(absl::string_view job,
                                      absl::string_view replicas,
                                      absl::string_view ns,
                                      absl::string_view domain);

// Static: "task=h1,h2;task2=h3" (a hostfile holds the same, ';' or newline
// separated, '#' comments).
absl::StatusOr<Cluster> ParseStaticPeers(absl::string_view spec,
                                         absl::string_view origin);
absl::StatusOr<Cluster> ReadPeersFile(const std::string& path);

}  // namespace distjob

#endif  // DISTJOB_DISCOVERY_PEERS_H_
