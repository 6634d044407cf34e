#include "common/log_rate_limiter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace distjob {

bool LogRateLimiter::Allow(absl::string_view kind, absl::Time now,
                           int64_t* held_back) {
  Kind& k = kinds_[kind];
  if (now - k.last_logged < interval_) {
    ++k.held_back;
    return false;
  }
  *held_back = k.held_back;
  k.held_back = 0;
  k.last_logged = now;
  return true;
}

std::vector<std::pair<std::string, int64_t>> LogRateLimiter::Overdue(
    absl::Time now) {
  std::vector<std::pair<std::string, int64_t>> overdue;
  for (auto& [name, k] : kinds_) {
    if (k.held_back == 0 || now - k.last_logged < interval_) continue;
    overdue.emplace_back(name, k.held_back);
    k.held_back = 0;
    // The summary is a line of its kind: the next event waits its turn.
    k.last_logged = now;
  }
  std::sort(overdue.begin(), overdue.end());
  return overdue;
}

std::string LogRateLimiter::Shape(absl::string_view text) {
  std::string shape;
  shape.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (!digit) {
      shape.push_back(text[i]);
    } else if (i == 0 || text[i - 1] < '0' || text[i - 1] > '9') {
      shape.push_back('#');
    }
  }
  return shape;
}

std::string LogRateLimiter::HeldBackSuffix(int64_t held_back) {
  if (held_back == 0) return "";
  return absl::StrCat(" (and ", held_back, " more like it not logged)");
}

void RateLimitedWarnings::Warn(absl::string_view kind,
                               const std::string& line) {
  int64_t held_back = 0;
  if (!limiter_.Allow(kind, absl::Now(), &held_back)) return;
  DJ_LOG_WARNING("{}: {}{}", prefix_, line,
                 LogRateLimiter::HeldBackSuffix(held_back));
}

void RateLimitedWarnings::TellOverdue() {
  for (const auto& [kind, count] : limiter_.Overdue(absl::Now())) {
    DJ_LOG_WARNING(
        "{}: {} more line(s) like '{}' not logged in the last second", prefix_,
        count, kind);
  }
}

}  // namespace distjob
