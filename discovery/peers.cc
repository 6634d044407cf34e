#include "discovery/peers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/net.h"

namespace distjob {
namespace {

absl::Status CheckHosts(const TaskPeers& peers) {
  if (peers.hosts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(peers.origin, ": no hosts for task '", peers.task, "'"));
  }
  std::set<std::string> seen;
  for (const std::string& host : peers.hosts) {
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(peers.origin, ": empty host name in the list"));
    }
    if (absl::Status s = CheckHostName(host, absl::StrCat(peers.origin, ":"));
        !s.ok()) {
      return s;
    }
    if (!seen.insert(host).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(peers.origin, ": duplicate host '", host, "'"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitHosts(absl::string_view text, char sep) {
  std::vector<std::string> hosts;
  for (absl::string_view h : absl::StrSplit(text, sep)) {
    h = absl::StripAsciiWhitespace(h);
    if (!h.empty()) hosts.emplace_back(h);
  }
  return hosts;
}

void SortTasks(Cluster* cluster) {
  std::sort(
      cluster->tasks.begin(), cluster->tasks.end(),
      [](const TaskPeers& a, const TaskPeers& b) { return a.task < b.task; });
}

absl::Status CheckUniqueTasks(const Cluster& cluster) {
  for (size_t i = 1; i < cluster.tasks.size(); ++i) {
    if (cluster.tasks[i].task == cluster.tasks[i - 1].task) {
      return absl::InvalidArgumentError(
          absl::StrCat(cluster.tasks[i].origin, ": task '",
                       cluster.tasks[i].task, "' is listed twice"));
    }
  }
  return absl::OkStatus();
}

// A ConfigMap's host list is a few KiB; anything far larger is not one.
constexpr size_t kMaxHostFileBytes = 1 << 20;

// Through the one input reader: a FIFO or device under the Volcano
// directory would otherwise hang or flood the agent before it has read a
// single host.
absl::StatusOr<std::string> ReadHostFile(const std::string& path) {
  return ReadInputFile("volcano file", path, kMaxHostFileBytes);
}

}  // namespace

const char* PeerSourceName(PeerSource source) {
  switch (source) {
    case PeerSource::kNone:
      return "none";
    case PeerSource::kVolcano:
      return "volcano";
    case PeerSource::kKubeflow:
      return "kubeflow";
    case PeerSource::kStatic:
      return "static";
  }
  return "none";
}

const TaskPeers* Cluster::Find(absl::string_view task) const {
  for (const TaskPeers& t : tasks) {
    if (t.task == task) return &t;
  }
  return nullptr;
}

int Cluster::TotalHosts() const {
  int n = 0;
  for (const TaskPeers& t : tasks) n += static_cast<int>(t.hosts.size());
  return n;
}

std::vector<std::string> Cluster::TaskNames() const {
  std::vector<std::string> names;
  for (const TaskPeers& t : tasks) names.push_back(t.task);
  return names;
}

std::string VolcanoHostFile(absl::string_view task) {
  std::string name(task);
  std::replace(name.begin(), name.end(), '-', '_');
  return name + ".host";
}

std::string VolcanoEnvTask(absl::string_view task) {
  std::string name = absl::AsciiStrToUpper(task);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

absl::StatusOr<Cluster> ReadVolcanoPeers(const std::string& dir,
                                         const EnvMap& env) {
  Cluster cluster;
  std::set<std::string> env_tasks;  // upper-case names already covered
  DIR* d = opendir(dir.c_str());
  struct stat st {};
  if (d == nullptr && errno == ENOTDIR && stat(dir.c_str(), &st) == 0) {
    // Absent means "not Volcano"; a file or FIFO there is a wrong flag.
    return absl::InvalidArgumentError(
        absl::StrCat(FileLabel("--volcano-dir", dir), ": ",
                     FileKind(st.st_mode), ", not a directory"));
  }
  if (d != nullptr) {
    std::vector<std::string> files;
    while (dirent* entry = readdir(d)) {
      absl::string_view name = entry->d_name;
      if (name[0] != '.' && absl::EndsWith(name, ".host")) {
        files.emplace_back(name);
      }
    }
    closedir(d);
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) {
      const std::string path = absl::StrCat(dir, "/", file);
      auto text = ReadHostFile(path);
      if (!text.ok()) return text.status();
      TaskPeers peers;
      // The file keeps the task name with '_' for '-'; DNS-1123 task names
      // cannot contain '_', so mapping back is exact.
      peers.task = std::string(absl::StripSuffix(file, ".host"));
      std::replace(peers.task.begin(), peers.task.end(), '_', '-');
      peers.hosts = SplitHosts(*text, '\n');
      peers.origin = absl::StrCat("volcano file ", path);
      if (peers.hosts.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("volcano file ", path, " is empty"));
      }
      if (absl::Status s = CheckHosts(peers); !s.ok()) return s;
      env_tasks.insert(VolcanoEnvTask(peers.task));
      cluster.tasks.push_back(std::move(peers));
    }
  }
  for (const auto& [key, value] : env) {
    if (!absl::StartsWith(key, "VC_") || !absl::EndsWith(key, "_HOSTS")) {
      continue;
    }
    std::string upper(key.substr(3, key.size() - 3 - 6));
    if (upper.empty() || env_tasks.count(upper)) continue;
    TaskPeers peers;
    peers.task = absl::AsciiStrToLower(upper);
    std::replace(peers.task.begin(), peers.task.end(), '_', '-');
    peers.hosts = SplitHosts(value, ',');
    peers.origin = absl::StrCat("env ", key);
    if (absl::Status s = CheckHosts(peers); !s.ok()) return s;
    env_tasks.insert(upper);
    cluster.tasks.push_back(std::move(peers));
  }
  // NUM must agree with the list, whichever source the list came from:
  // a disagreement means a stale or hand-edited ConfigMap.
  for (const TaskPeers& peers : cluster.tasks) {
    const std::string var =
        absl::StrCat("VC_", VolcanoEnvTask(peers.task), "_NUM");
    auto num = Lookup(env, var);
    if (!num.has_value()) continue;
    int n = 0;
    if (!absl::SimpleAtoi(*num, &n) || n < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env ", var, "='", *num, "' is not a non-negative integer"));
    }
    if (n != static_cast<int>(peers.hosts.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("env ", var, "=", n, " disagrees with ", peers.origin,
                       " (", peers.hosts.size(), " hosts)"));
    }
  }
  if (!cluster.tasks.empty()) cluster.source = PeerSource::kVolcano;
  SortTasks(&cluster);
  return cluster;
}

absl::StatusOr<Cluster> KubeflowPeers(absl::string_view job,
                                      absl::string_view replicas,
                                      absl::string_view ns,
                                      absl::string_view domain) {
  if (job.empty()) {
    return absl::InvalidArgumentError(
        "--replicas needs the job name: set --job-name (DISTJOB_JOB_NAME) or "
        "run in a pod named <job>-<type>-<index>");
  }
  Cluster cluster;
  cluster.source = PeerSource::kKubeflow;
  for (absl::string_view item :
       absl::StrSplit(replicas, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string type =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(kv.first));
    int n = 0;
    if (type.empty() ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(kv.second), &n) || n < 1 ||
        n > 100000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", item, "' is not TYPE=COUNT (e.g. worker=4,ps=2, COUNT >= 1)"));
    }
    TaskPeers peers;
    peers.task = type;
    peers.origin = "flag --replicas";
    for (int i = 0; i < n; ++i) {
      std::string host = absl::StrCat(job, "-", type, "-", i);
      if (!ns.empty()) absl::StrAppend(&host, ".", ns, ".svc");
      if (!ns.empty() && !domain.empty()) absl::StrAppend(&host, ".", domain);
      peers.hosts.push_back(std::move(host));
    }
    if (absl::Status s = CheckHosts(peers); !s.ok()) return s;
    cluster.tasks.push_back(std::move(peers));
  }
  if (cluster.tasks.empty()) {
    return absl::InvalidArgumentError(
        "no replicas given; expected TYPE=COUNT[,TYPE=COUNT...]");
  }
  SortTasks(&cluster);
  if (absl::Status s = CheckUniqueTasks(cluster); !s.ok()) return s;
  return cluster;
}

absl::StatusOr<Cluster> ParseStaticPeers(absl::string_view spec,
                                         absl::string_view origin) {
  Cluster cluster;
  cluster.source = PeerSource::kStatic;
  std::string normalized(spec);
  std::replace(normalized.begin(), normalized.end(), '\n', ';');
  for (absl::string_view line : absl::StrSplit(normalized, ';')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    TaskPeers peers;
    peers.task = std::string(absl::StripAsciiWhitespace(kv.first));
    peers.hosts = SplitHosts(kv.second, ',');
    peers.origin = std::string(origin);
    if (peers.task.empty() || !absl::StrContains(line, '=')) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": '", line,
          "' is not TASK=HOST[,HOST...] (e.g. worker=h1,h2;ps=h3)"));
    }
    if (absl::Status s = CheckHosts(peers); !s.ok()) return s;
    cluster.tasks.push_back(std::move(peers));
  }
  if (cluster.tasks.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": no peers; expected TASK=HOST[,HOST...]"));
  }
  SortTasks(&cluster);
  if (absl::Status s = CheckUniqueTasks(cluster); !s.ok()) return s;
  return cluster;
}

absl::StatusOr<Cluster> ReadPeersFile(const std::string& path) {
  // A peer list is one line per task; 1 MiB is far past any job's.
  auto text = ReadInputFile("--peers-file", path, kMaxHostFileBytes);
  if (!text.ok()) return text.status();
  return ParseStaticPeers(*text, absl::StrCat("peers file ", path));
}

}  // namespace distjob
