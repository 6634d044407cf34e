#include "agent/mpi_lost_hosts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/text.h"

namespace distjob {
namespace {

// A record stays under PIPE_BUF, so each append is one write.
constexpr size_t kMaxHostBytes = 255;
constexpr size_t kMaxWhyBytes = 200;
// The launcher reads at most this much: thousands of hosts' records.
constexpr size_t kMaxFileBytes = size_t{1} << 20;

// `text` on one line, without the tab that separates a record's fields.
std::string Field(absl::string_view text, size_t limit) {
  std::string out = OneLine(text);
  for (char& c : out) {
    if (c == '\t') c = ' ';
  }
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace

absl::Status CreateLostHostsFile(const std::string& path) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("cannot create ", path));
  close(fd);
  return absl::OkStatus();
}

void RecordLostHost(const EnvMap& env, absl::string_view host,
                    absl::string_view why, bool refused) {
  const std::string path = Lookup(env, kLostHostsFileVariable).value_or("");
  if (path.empty()) return;
  // No O_CREAT: only the file the launcher made is written to; O_NONBLOCK
  // so that a FIFO put in its place cannot hold rsh.
  const int fd = open(
      path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const std::string line =
        absl::StrCat(Field(host, kMaxHostBytes), "\t", refused ? "R" : "L",
                     "\t", Field(why, kMaxWhyBytes), "\n");
    (void)!write(fd, line.data(), line.size());  // best effort, see header
  }
  close(fd);
}

std::vector<LostHost> ReadLostHosts(const std::string& path) {
  std::vector<LostHost> lost;
  std::set<std::string> seen;
  const std::string text = ReadSmallFile(path, kMaxFileBytes);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::MaxSplits('\t', 2));
    if (fields.size() != 3 || fields[0].empty()) continue;
    if (!seen.insert(std::string(fields[0])).second) continue;
    lost.push_back(
        {std::string(fields[0]), std::string(fields[2]), fields[1] == "R"});
  }
  return lost;
}

std::string DescribeLostHosts(const std::vector<LostHost>& lost, size_t limit) {
  std::string out;
  for (size_t i = 0; i < lost.size() && i < limit; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", lost[i].host);
    if (!lost[i].why.empty()) absl::StrAppend(&out, " (", lost[i].why, ")");
  }
  if (lost.size() > limit) {
    absl::StrAppend(&out, " and ", lost.size() - limit, " more");
  }
  return out;
}

}  // namespace distjob
