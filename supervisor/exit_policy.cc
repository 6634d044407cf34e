#include "supervisor/exit_policy.h"

#include <sys/wait.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace distjob {

std::string ExitClassName(ExitClass c) {
  switch (c) {
    case ExitClass::kSuccess:
      return "success";
    case ExitClass::kPermanent:
      return "permanent";
    case ExitClass::kRetryable:
      return "retryable";
  }
  return "unknown";
}

int ExitCodeFromWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 255;
}

ExitClass ExitPolicy::Classify(int exit_code) const {
  if (exit_code == 0) return ExitClass::kSuccess;
  if (permanent_overrides.count(exit_code)) return ExitClass::kPermanent;
  if (retryable_overrides.count(exit_code) || restart_on_any_failure) {
    return ExitClass::kRetryable;
  }
  return exit_code >= 128 ? ExitClass::kRetryable : ExitClass::kPermanent;
}

absl::StatusOr<std::set<int>> ParseExitCodeList(absl::string_view text) {
  std::set<int> codes;
  auto bad = [&](absl::string_view part) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", part, "' is not an exit code 1-255 or a range like 10-20"));
  };
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (range.size() == 1) {
      if (!absl::SimpleAtoi(range[0], &lo)) return bad(part);
      hi = lo;
    } else if (range.size() == 2) {
      if (!absl::SimpleAtoi(range[0], &lo) || !absl::SimpleAtoi(range[1], &hi))
        return bad(part);
    } else {
      return bad(part);
    }
    if (lo < 1 || hi > 255 || lo > hi) return bad(part);
    for (int c = lo; c <= hi; ++c) codes.insert(c);
  }
  return codes;
}

}  // namespace distjob
