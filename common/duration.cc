#include "common/duration.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace distjob {

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text,
                                             absl::string_view what) {
  auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": '", text,
        "' is not a duration; use seconds (e.g. 30 or 0.5) or a number with "
        "a unit: ms, s, m, h (e.g. 500ms, 2m)"));
  };
  absl::string_view number = text;
  double scale = 1.0;  // seconds
  if (absl::ConsumeSuffix(&number, "ms")) {
    scale = 1e-3;
  } else if (absl::ConsumeSuffix(&number, "s")) {
    scale = 1.0;
  } else if (absl::ConsumeSuffix(&number, "m")) {
    scale = 60.0;
  } else if (absl::ConsumeSuffix(&number, "h")) {
    scale = 3600.0;
  }
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) ||
      !std::isfinite(value)) {
    return invalid();
  }
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is negative; durations are >= 0"));
  }
  const double seconds = value * scale;
  if (!std::isfinite(seconds) ||
      seconds > absl::ToDoubleSeconds(kMaxDuration)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is longer than ",
                     absl::ToInt64Hours(kMaxDuration) / 24, " days"));
  }
  return absl::Seconds(seconds);
}

std::string FormatSeconds(absl::Duration d) {
  const double seconds = absl::ToDoubleSeconds(d);
  std::string out = absl::StrFormat("%.3f", seconds);
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out + "s";
}

}  // namespace distjob
