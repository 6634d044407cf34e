// The agent's descendants, read from /proc. Needed because a worker may
// start processes that leave its process group (setsid, setpgid); once
// their parent dies they are re-parented to the agent (PID 1 or subreaper),
// but while the parent lives they are only found by walking the tree.
#ifndef DISTJOB_SUPERVISOR_PROCESS_TREE_H_
#define DISTJOB_SUPERVISOR_PROCESS_TREE_H_

#include <sys/types.h>

#include <vector>

namespace distjob {

// Every live descendant of `root` (not `root` itself), zombies excluded.
std::vector<pid_t> ListDescendants(pid_t root);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_PROCESS_TREE_H_
