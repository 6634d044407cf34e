#include "agent/diagnostics.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/logging.h"

namespace distjob {

Json DiagnosticsJson(const GroupResult& group, const WorkerLogs& files,
                     int attempt, int nproc) {
  Json collections = Json::array();
  for (const Evidence& e : group.evidence) {
    collections.push_back(EvidenceToJson(e));
  }
  Json tails = Json::object();
  for (int rank = 0; rank < nproc; ++rank) {
    std::string tail = files.StderrTail(attempt, rank);
    if (tail.size() > kDiagnosticsStderrBytes) {
      tail.erase(0, tail.size() - kDiagnosticsStderrBytes);
    }
    tails[std::to_string(rank)] = ValidUtf8(tail);
  }
  return Json{{"attempt", attempt},
              {"collections", std::move(collections)},
              {"unkillable_local_ranks", group.unkillable},
              {"stderr_tails", std::move(tails)}};
}

absl::StatusOr<std::string> WriteDiagnostics(const GroupResult& group,
                                             const WorkerLogs& files,
                                             int attempt, int nproc) {
  if (group.evidence.empty() || !files.enabled()) return std::string();
  const std::string path =
      absl::StrCat(files.dir(), "/attempt_", attempt, "/diagnostics.json");
  auto fd = OpenOutputFile("the diagnostics file", path, O_TRUNC);
  if (!fd.ok()) return fd.status();
  absl::Cleanup close_fd = [&fd] { close(*fd); };
  const std::string text =
      DumpJson(DiagnosticsJson(group, files, attempt, nproc), 2) + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(*fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, path);
    }
    done += static_cast<size_t>(n);
  }
  return path;
}

std::string RecordDiagnostics(const GroupResult& group, WorkerLogs* files,
                              int attempt, int nproc, Observer* observer) {
  auto path = WriteDiagnostics(group, *files, attempt, nproc);
  if (!path.ok()) {
    DJ_LOG_WARNING("no diagnostics file: {}", path.status());
    return "";
  }
  if (path->empty()) return "";
  files->Keep();
  DJ_LOG_WARNING("attempt {}: diagnostics in {}", attempt, *path);
  observer->Diagnostics(*path, attempt, group.unkillable,
                        SummarizeEvidence(group.evidence.front()));
  return *path;
}

}  // namespace distjob
