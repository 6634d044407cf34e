// JSON in and out through nlohmann/json, at one boundary: nothing here
// throws, and what is written is valid JSON whatever bytes a worker left in
// its error text (invalid UTF-8 becomes U+FFFD, as Python's
// errors="replace" would show it).
#ifndef DISTJOB_COMMON_JSON_H_
#define DISTJOB_COMMON_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace distjob {

// Keys stay in insertion order, so output reads as it was built (and a
// worker's error file keeps its own order). One type only: a second
// nlohmann::basic_json instantiation cost the static binary 12 KB.
using Json = nlohmann::ordered_json;

// `value` serialised on one line (`indent` < 0) or pretty-printed; with
// `ascii`, every non-ASCII character as \uXXXX (for a terminal: no C1
// control reaches it raw).
std::string DumpJson(const Json& value, int indent = -1, bool ascii = false);

// `text` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string ValidUtf8(absl::string_view text);

// `text` parsed; InvalidArgument naming `what` (a path, a flag) when it is
// not JSON. A \uXXXX escape of a lone UTF-16 surrogate (what Python's
// json.dumps writes for an undecodable byte, e.g. \udcff) is valid JSON
// syntax that nlohmann refuses: it is read as U+FFFD, so a worker's error
// file keeps its text.
absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what);

}  // namespace distjob

#endif  // DISTJOB_COMMON_JSON_H_
