// Evidence of what the workers were doing, collected before the agent stops
// or kills them (a hang, an expired FileTimer, a failure that stops the
// group, a stop signal, the end of the grace period): what the kernel says
// of each thread, and what the worker's own server (TORCH_WORKER_SERVER_
// SOCKET) answers. Bounded in time: a hung worker is why it is asked.
#ifndef DISTJOB_SUPERVISOR_EVIDENCE_H_
#define DISTJOB_SUPERVISOR_EVIDENCE_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/json.h"
#include "supervisor/thread_states.h"

namespace distjob {

struct EvidenceOptions {
  // Where /proc is (a fake tree in tests).
  std::string proc_root = "/proc";
  // How long one collection may take at most; also never past the end of
  // the grace period, which the caller's deadline carries.
  absl::Duration budget = absl::Seconds(5);
  // The handlers asked of a worker that serves TORCH_WORKER_SERVER_SOCKET.
  std::vector<std::string> handlers = {"fr_trace_json", "wait_counter_values"};
  // Each answer is cut at this many bytes.
  size_t max_answer_bytes = size_t{1} << 20;
};

struct EvidenceTarget {
  int local_rank = 0;
  pid_t pid = 0;
  std::string server_socket;  // "" or not listening: not asked
};

struct WorkerEvidence {
  int local_rank = 0;
  pid_t pid = 0;
  // The worker first, then its descendants (at most 16).
  std::vector<ProcessStates> processes;
  // (handler, its answer) in the order asked; an error reads "error: ...".
  std::vector<std::pair<std::string, std::string>> answers;
};

struct Evidence {
  std::string reason;  // why the workers are about to be stopped or killed
  absl::Time time;
  absl::Duration took;
  std::vector<WorkerEvidence> workers;
};

// Collects evidence of every target by `deadline` (the budget from now,
// earlier if the caller's deadline is earlier); with `ask_servers` false
// (SIGKILL is due), only the kernel's view, which costs no waiting.
Evidence CollectEvidence(const std::vector<EvidenceTarget>& targets,
                         const std::string& reason,
                         const EvidenceOptions& options, absl::Time deadline,
                         bool ask_servers);

// One line per worker for the console: where its threads wait, which are
// in uninterruptible sleep (unkillable), what its server answered.
std::vector<std::string> SummarizeEvidence(const Evidence& evidence);

// The JSON the diagnostics file holds of one collection.
Json EvidenceToJson(const Evidence& evidence);

// The local ranks with a thread in uninterruptible sleep (D).
std::vector<int> UnkillableRanks(const Evidence& evidence);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_EVIDENCE_H_
