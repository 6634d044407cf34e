// Values and messages made fit for one log line or termination message:
// whatever bytes a flag, variable or file held, the line stays one line
// and short enough to read.
#ifndef DISTJOB_COMMON_TEXT_H_
#define DISTJOB_COMMON_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace distjob {

// `value` single-quoted with control bytes, quotes and non-ASCII escaped as
// in C, and cut after `max_bytes` of input with the total length said, so
// a 100 KB variable stays readable.
std::string QuoteForMessage(absl::string_view value, size_t max_bytes = 80);

// `message` with newlines and other control bytes escaped (printable text,
// UTF-8 included, kept) and cut to `max_bytes` of input, for the one-line
// errors the agent prints before it exits.
std::string OneLine(absl::string_view message, size_t max_bytes = 2048);

}  // namespace distjob

#endif  // DISTJOB_COMMON_TEXT_H_
