// Descriptors the agent keeps for its own last work. A flood of connections
// or a worker's leak can fill the process's descriptor table; the agent
// must still write its termination message and error file, or the pod's
// status says nothing and a worker's retryable failure reads as the agent's
// own. A few descriptors opened on /dev/null at start are closed just
// before that work, so it finds them free.
#ifndef DISTJOB_AGENT_FD_RESERVE_H_
#define DISTJOB_AGENT_FD_RESERVE_H_

namespace distjob {

// Descriptors held: the termination message (a temporary file and its
// directory), the error file, the event log's last lines, with room.
inline constexpr int kReservedFds = 8;

// Opens kReservedFds descriptors on /dev/null (close-on-exec), unless some
// are already held; returns how many are held. Best effort: a table that
// is already full holds fewer.
int HoldReservedFds();

// Closes the held descriptors (none held: nothing) so that the next opens
// get them. Not thread-safe with HoldReservedFds; called from the agent's
// main thread only.
void ReleaseReservedFds();

}  // namespace distjob

#endif  // DISTJOB_AGENT_FD_RESERVE_H_
