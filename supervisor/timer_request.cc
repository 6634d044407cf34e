#include "supervisor/timer_request.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace distjob {
namespace {

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("FileTimer request: ", what));
}

// An integer field within [lo, hi]; JSON numbers with a fraction refused.
absl::StatusOr<int64_t> IntField(const Json& doc, const char* name, int64_t lo,
                                 int64_t hi) {
  auto it = doc.find(name);
  if (it == doc.end()) return Invalid(absl::StrCat("no \"", name, "\""));
  if (!it->is_number_integer()) {
    return Invalid(absl::StrCat("\"", name, "\" is not an integer"));
  }
  const int64_t v =
      it->is_number_unsigned() &&
              it->get<uint64_t>() >
                  static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
          ? std::numeric_limits<int64_t>::max()
          : it->get<int64_t>();
  if (v < lo || v > hi) {
    return Invalid(absl::StrCat("\"", name, "\" ", v, " is out of range"));
  }
  return v;
}

}  // namespace

absl::StatusOr<TimerRequest> ParseTimerRequest(absl::string_view line) {
  if (line.size() > kMaxTimerRequestBytes) {
    return Invalid(
        absl::StrCat(line.size(), " bytes, more than ", kMaxTimerRequestBytes));
  }
  auto parsed = ParseJson(line, "FileTimer request");
  if (!parsed.ok()) return Invalid("not JSON");
  const Json& doc = *parsed;
  if (!doc.is_object()) return Invalid("not a JSON object");
  auto version = IntField(doc, "version", 1, 1);
  if (!version.ok()) return version.status();
  TimerRequest r;
  auto pid = IntField(doc, "pid", 1, std::numeric_limits<pid_t>::max());
  if (!pid.ok()) return pid.status();
  r.pid = static_cast<pid_t>(*pid);
  auto scope = doc.find("scope_id");
  if (scope == doc.end() || !scope->is_string() ||
      scope->get_ref<const std::string&>().empty()) {
    return Invalid("\"scope_id\" is not a non-empty string");
  }
  r.scope_id = scope->get<std::string>();
  auto expiration = doc.find("expiration_time");
  if (expiration == doc.end() || !expiration->is_number()) {
    return Invalid("\"expiration_time\" is not a number");
  }
  const double seconds = expiration->get<double>();
  if (!std::isfinite(seconds))
    return Invalid("\"expiration_time\" is not finite");
  r.release = seconds < 0;
  if (!r.release) {
    // Whole seconds and the fraction apart: a double holds the epoch's
    // seconds exactly, but not their nanoseconds.
    const double capped = std::min(seconds, 9.2e9);  // year 2261
    const double whole = std::floor(capped);
    r.expiration = absl::FromUnixSeconds(static_cast<int64_t>(whole)) +
                   absl::Nanoseconds(std::llround((capped - whole) * 1e9));
  }
  // Negative or zero: torch logs the expiry and signals nothing.
  auto sig = IntField(doc, "signal", std::numeric_limits<int>::min(), SIGRTMAX);
  if (!sig.ok()) return sig.status();
  r.signal = static_cast<int>(*sig);
  return r;
}

}  // namespace distjob
