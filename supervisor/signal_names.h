// Signal names and numbers, both ways, for flags, logs and reports.
#ifndef DISTJOB_SUPERVISOR_SIGNAL_NAMES_H_
#define DISTJOB_SUPERVISOR_SIGNAL_NAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

// "SIGTERM" for 15, "SIGRTMIN+3" for real-time signals, "signal 99" else.
std::string SignalName(int signal_number);

// "SIGTERM", "TERM", "term" or "15"; InvalidArgument names the bad entry.
absl::StatusOr<int> ParseSignal(absl::string_view text);

// A comma-separated list of ParseSignal forms; empty entries are rejected.
absl::StatusOr<std::vector<int>> ParseSignalList(absl::string_view text);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_SIGNAL_NAMES_H_
