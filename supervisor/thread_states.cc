#include "supervisor/thread_states.h"

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace distjob {
namespace {

// /proc files are small; a bound keeps a fake tree (or a strange kernel)
// from making one read large.
constexpr size_t kProcFileLimit = 4096;

std::vector<pid_t> ListTids(const std::string& task_dir) {
  std::vector<pid_t> tids;
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return tids;
  while (dirent* entry = readdir(dir)) {
    int tid = 0;
    if (absl::SimpleAtoi(entry->d_name, &tid) && tid > 0) tids.push_back(tid);
  }
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

// "<tid> (<comm>) <state> ...": comm may hold spaces and parentheses, so
// it ends at the last ')'.
bool ParseStat(absl::string_view stat, ThreadState* thread) {
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos ||
      close < open || close + 2 >= stat.size()) {
    return false;
  }
  thread->comm = std::string(stat.substr(open + 1, close - open - 1));
  thread->state = stat[close + 2];
  return true;
}

}  // namespace

ProcessStates ReadThreadStates(const std::string& proc_root, pid_t pid) {
  ProcessStates process;
  process.pid = pid;
  const std::string task_dir = absl::StrCat(proc_root, "/", pid, "/task");
  std::vector<pid_t> tids = ListTids(task_dir);
  if (static_cast<int>(tids.size()) > kMaxThreadsRead) {
    process.threads_not_read = static_cast<int>(tids.size()) - kMaxThreadsRead;
    tids.resize(kMaxThreadsRead);
  }
  for (pid_t tid : tids) {
    const std::string dir = absl::StrCat(task_dir, "/", tid);
    auto stat = ReadSmallRegularFile(dir + "/stat", kProcFileLimit);
    ThreadState thread;
    thread.tid = tid;
    if (!stat.ok() || !ParseStat(*stat, &thread)) continue;  // it exited
    const std::string wchan = std::string(absl::StripAsciiWhitespace(
        ReadSmallFile(dir + "/wchan", kProcFileLimit)));
    // "0" is what the kernel writes for a thread that waits in nothing.
    if (wchan != "0") thread.wchan = wchan;
    process.threads.push_back(std::move(thread));
  }
  return process;
}

bool Unkillable(const ProcessStates& process) {
  return std::any_of(process.threads.begin(), process.threads.end(),
                     [](const ThreadState& t) { return t.state == 'D'; });
}

std::string DescribeState(char state) {
  switch (state) {
    case 'R':
      return "running (R)";
    case 'S':
      return "sleeping (S)";
    case 'D':
      return "uninterruptible sleep (D)";
    case 'T':
      return "stopped (T)";
    case 't':
      return "stopped by a tracer (t)";
    case 'Z':
      return "zombie (Z)";
    default:
      return absl::StrCat("state ", std::string(1, state));
  }
}

}  // namespace distjob
