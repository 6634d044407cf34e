// What happens to each complete line a worker writes on a tee'd stream, and
// which of a worker's streams reach the console at all: torchrun's
// --local-ranks-filter, --log-line-prefix-template and
// --duplicate-stdout-filters / --duplicate-stderr-filters. Kept apart from
// the line engine (supervisor/worker_logs) so that engine only asks "where
// does this line go".
#ifndef DISTJOB_SUPERVISOR_LINE_POLICY_H_
#define DISTJOB_SUPERVISOR_LINE_POLICY_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace distjob {

// One tee'd stream's line routing.
struct LinePolicy {
  // Whether lines reach the console (false for ranks outside
  // --local-ranks-filter: their files still get every line).
  bool console = true;
  // Put before each console line (and each duplicated line).
  std::string prefix;
  // Substrings; a line containing any of them is also appended to
  // `duplicate_fd` (attempt_N/filtered_std{out,err}.log).
  std::vector<std::string> duplicate_filters;
  int duplicate_fd = -1;
  // --worker-log-format json: each console line leaves as one JSON object,
  // these fields (WorkerLineJsonFields) and "line", instead of `prefix` and
  // the line. Null: text.
  Json json_fields;
};

// {"rank":R,"local_rank":L,"stream":"stdout"} for LinePolicy's json_fields.
Json WorkerLineJsonFields(int rank, int local_rank, absl::string_view stream);

// Whether `line` goes to the duplicate file.
bool ShouldDuplicate(const LinePolicy& policy, absl::string_view line);

// "R[,R...]" of local ranks (whitespace around each allowed); "" is none.
absl::StatusOr<std::set<int>> ParseLocalRanksFilter(absl::string_view value);

// A comma-separated list of substrings where ",," stands for a literal
// comma; empty entries are dropped, as torchrun does.
std::vector<std::string> ParseDuplicateFilters(absl::string_view value);

// The values torchrun substitutes in a log-line prefix template.
struct PrefixFields {
  std::string role_name;
  int local_rank = 0;
  int rank = 0;
  std::string hostname;
};

// Python string.Template's safe_substitute over ${role_name}, ${local_rank},
// ${rank} and ${hostname} (also without braces); "$$" is "$", anything else
// stays as written. An empty template gives torchrun's default
// "[<role><local_rank>]:".
std::string RenderLinePrefix(absl::string_view templ,
                             const PrefixFields& fields);

// How one worker's streams are routed once --local-ranks-filter is applied,
// as torchrun's DefaultLogsSpecs does: a rank outside the filter keeps its
// files (tee becomes redirect) and what would have reached the console
// unprefixed goes to /dev/null. Masks: 1 stdout, 2 stderr.
struct StreamPlan {
  int redirect = 0;  // to files only
  int tee = 0;       // to files and the console
  int discard = 0;   // to /dev/null
};
StreamPlan PlanStreams(int redirect, int tee, bool shown);

// Whether `local_rank` is shown by `filter` (empty: every rank).
bool RankShown(const std::set<int>& filter, int local_rank);

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_LINE_POLICY_H_
