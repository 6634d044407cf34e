// Stops the workers' process groups when a non-PID-1 agent dies without
// stopping them (kill -9). PR_SET_PDEATHSIG ends each worker, but only the
// worker: its children would be re-parented and train on. The guard is a
// tiny process outside the agent's tree (forked twice, so it is not the
// agent's child and the agent's own process-tree walk never sees it) that
// holds the read end of a pipe only the agent writes to. The agent tells it
// each worker's process group as it starts and clears the list once an
// attempt is drained; when the pipe reaches end of file (the agent is gone,
// whichever way), the guard SIGKILLs every group still listed and exits.
//
// Its reach is the workers' process groups: a process that left its group
// with setsid is not covered (as PID 1 the kernel ends the whole namespace
// instead, and no guard is started).
#ifndef DISTJOB_SUPERVISOR_TREE_GUARD_H_
#define DISTJOB_SUPERVISOR_TREE_GUARD_H_

#include <sys/types.h>

#include <memory>

#include "absl/status/statusor.h"

namespace distjob {

class TreeGuard {
 public:
  // Starts the guard process. Call before the agent becomes a child
  // subreaper, or the guard would be re-parented to it.
  static absl::StatusOr<std::unique_ptr<TreeGuard>> Start();
  ~TreeGuard();  // the guard sees end of file and exits
  TreeGuard(const TreeGuard&) = delete;
  TreeGuard& operator=(const TreeGuard&) = delete;

  // A worker's process group, to be killed if the agent dies.
  void Add(pid_t process_group);
  // The attempt's groups are gone: forget them all.
  void Clear();

 private:
  explicit TreeGuard(int fd) : fd_(fd) {}
  void Send(pid_t value);
  int fd_;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_TREE_GUARD_H_
