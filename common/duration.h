// Parses the durations users write in flags and --rdzv-conf values.
#ifndef DISTJOB_COMMON_DURATION_H_
#define DISTJOB_COMMON_DURATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {

// The longest duration any flag or key accepts: every timeout stays bounded,
// and nothing overflows when added to now or doubled by a backoff.
inline constexpr absl::Duration kMaxDuration = absl::Hours(24 * 365);

// Accepts a non-negative number of seconds ("30", "0.5", torchrun's form) or
// a number with a unit ("500ms", "30s", "2m", "1h"). `what` names the flag or
// key in the error message. Non-finite values (nan, inf, 1e400) and values
// above kMaxDuration are InvalidArgument.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text,
                                             absl::string_view what);

// Seconds with up to three decimals and an "s": "30s", "0.5s".
std::string FormatSeconds(absl::Duration d);

}  // namespace distjob

#endif  // DISTJOB_COMMON_DURATION_H_
