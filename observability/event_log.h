// The agent's event log (--event-log-handler, torchrun's flag): one JSON
// object per line for each lifecycle event (started, peers_resolved,
// round_closed, workers_started, worker_exited, hang, oom, restart,
// membership_change, stop_signal, exit), so a log pipeline can rebuild a
// job's history without parsing the agent's prose.
#ifndef DISTJOB_OBSERVABILITY_EVENT_LOG_H_
#define DISTJOB_OBSERVABILITY_EVENT_LOG_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/json.h"

namespace distjob {

// Checks a handler spec: "null" (none, torchrun's default), "console"
// (stderr) or "file:PATH". InvalidArgument saying what is accepted.
absl::Status ValidateEventLogHandler(absl::string_view spec);

class EventLog {
 public:
  EventLog() = default;  // "null": Emit does nothing
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Opens the handler `spec` names (the file is appended to, so restarts
  // of the container add to one history). InvalidArgument naming
  // --event-log-handler and the path when it cannot be opened.
  absl::Status Open(absl::string_view spec);

  // Fields every event carries from now on (job, node_rank, round,
  // attempt); a later call overwrites a key.
  void SetContext(const std::string& key, Json value);

  // One line: {"time", "event", <context>, <fields>}. Thread-safe.
  void Emit(const std::string& event, const Json& fields = Json::object());

 private:
  void NoteLost(int error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::FILE* out_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool owned_ ABSL_GUARDED_BY(mu_) = false;
  Json context_ ABSL_GUARDED_BY(mu_) = Json::object();
  std::string path_ ABSL_GUARDED_BY(mu_);  // file:PATH's, for warnings
  // Lines a full or failing file lost since the last warning, and when
  // that was: one warning a minute, not one per event.
  int64_t lost_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_warning_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace distjob

#endif  // DISTJOB_OBSERVABILITY_EVENT_LOG_H_
