// What the kernel says each thread of a process is doing, from
// /proc/<pid>/task/<tid>/{stat,wchan}: the evidence a hang leaves that
// needs no help from the hung process. A thread in D (uninterruptible
// sleep) cannot be killed until its I/O returns, and keeps its GPU.
#ifndef DISTJOB_SUPERVISOR_THREAD_STATES_H_
#define DISTJOB_SUPERVISOR_THREAD_STATES_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace distjob {

struct ThreadState {
  pid_t tid = 0;
  std::string comm;   // the thread's name, as the kernel keeps it
  char state = '?';   // R, S, D, T, t, Z, ...
  std::string wchan;  // the kernel function it waits in; "" if running
};

struct ProcessStates {
  pid_t pid = 0;
  std::vector<ThreadState> threads;  // by tid; empty: the process is gone
  // Threads listed past kMaxThreadsRead, not read.
  int threads_not_read = 0;
};

// At most this many threads of one process are read: a process with
// 100,000 threads must not make evidence collection take seconds.
inline constexpr int kMaxThreadsRead = 256;

// The threads of `pid` under `proc_root` ("/proc"; a fake tree in tests).
ProcessStates ReadThreadStates(const std::string& proc_root, pid_t pid);

// Whether any thread is in uninterruptible sleep (D): SIGKILL waits for it.
bool Unkillable(const ProcessStates& process);

// "D" -> "uninterruptible sleep (D)", ...: how a log line names a state.
std::string DescribeState(char state);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_THREAD_STATES_H_
