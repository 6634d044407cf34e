// Tests of event loops that poll rather than sleep (common/busy_poll.h)
// look at a thread's scheduler state by the thread's name, and wait for
// it (or anything else) with a deadline.
#ifndef DISTJOB_COMMON_THREAD_STATE_TESTING_H_
#define DISTJOB_COMMON_THREAD_STATE_TESTING_H_

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace distjob {

// The scheduler's state of this process's first thread named `name`
// (/proc: 'S' asleep, 'R' running), or '?' when none has that name.
inline char ThreadState(const std::string& name) {
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    std::string stat;
    std::getline(std::ifstream(task.path() / "stat"), stat);
    const size_t paren = stat.rfind(')');
    return paren + 2 < stat.size() ? stat[paren + 2] : '?';
  }
  return '?';
}

// True once `cond` holds, looking every 5 ms for up to `within`.
inline bool WaitFor(const std::function<bool()>& cond,
                    absl::Duration within = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + within;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return cond();
}

}  // namespace distjob

#endif  // DISTJOB_COMMON_THREAD_STATE_TESTING_H_
