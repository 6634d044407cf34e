#include "supervisor/failure_cause.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "supervisor/signal_names.h"

namespace distjob {
namespace {

// Exception types that a restart cannot fix: the same code and data raise
// them again.
constexpr absl::string_view kProgrammingErrors[] = {
    "SyntaxError",
    "IndentationError",
    "TabError",
    "ImportError",
    "ModuleNotFoundError",
    "NameError",
    "UnboundLocalError",
    "TypeError",
    "AttributeError",
    "KeyError",
    "IndexError",
    "ValueError",
    "AssertionError",
    "FileNotFoundError",
    "NotADirectoryError",
    "IsADirectoryError",
    "PermissionError",
    "ZeroDivisionError",
    "NotImplementedError",
    "RecursionError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "LookupError",
    "ArithmeticError",
};

// Exception types of a connection or a timeout: the network or a peer.
constexpr absl::string_view kConnectionErrors[] = {
    "ConnectionError",
    "ConnectionResetError",
    "ConnectionRefusedError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "TimeoutError",
    "timeout",
    "OSError",
    "IOError",
    "DistNetworkError",
    "DistStoreError",
    "DistBackendError",
    "RendezvousConnectionError",
    "RendezvousTimeoutError",
};

// Infrastructure errors, recognised by what their message says.
struct TextRule {
  absl::string_view name;
  bool peer;  // a peer or the network went away
  std::vector<absl::string_view> needles;
};

const std::vector<TextRule>& TextRules() {
  static const auto* rules = new std::vector<TextRule>{
      {"a gloo communication error",
       true,
       {"gloo/transport", "Gloo connectFullMesh failed",
        "Connection closed by peer", "Connection reset by peer"}},
      {"an NCCL communication error",
       true,
       {"NCCL error", "NCCL communicator was aborted", "ncclSystemError",
        "ncclRemoteError", "ncclInternalError",
        "Watchdog caught collective operation timeout", "ProcessGroupNCCL"}},
      {"a c10d store or collective error",
       true,
       {"DistNetworkError", "DistStoreError", "TCPStore", "Socket Timeout",
        "c10d"}},
      {"a network error",
       true,
       {"Connection refused", "Broken pipe", "Network is unreachable",
        "No route to host"}},
      {"a port already in use", false, {"Address already in use"}},
      {"a CUDA error",
       false,
       {"CUDA error", "uncorrectable ECC error", "unspecified launch failure",
        "CUDA driver error", "cudaErrorECCUncorrectable",
        "CUBLAS_STATUS_EXECUTION_FAILED"}},
  };
  return *rules;
}

constexpr absl::string_view kDeviceAssert = "device-side assert triggered";

bool Contains(absl::Span<const absl::string_view> names,
              absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The last component of a qualified type: torch.distributed.X -> X.
absl::string_view ShortType(absl::string_view type) {
  const size_t dot = type.rfind('.');
  return dot == absl::string_view::npos ? type : type.substr(dot + 1);
}

const TextRule* MatchTextRule(absl::string_view text) {
  for (const TextRule& rule : TextRules()) {
    for (absl::string_view needle : rule.needles) {
      if (absl::StrContains(text, needle)) return &rule;
    }
  }
  return nullptr;
}

// A Python exception line: "Type: message" or "Type", the type a dotted
// identifier.
bool IsExceptionLine(absl::string_view line, std::string* type) {
  size_t end = 0;
  while (end < line.size() &&
         (std::isalnum(static_cast<unsigned char>(line[end])) ||
          line[end] == '_' || line[end] == '.')) {
    ++end;
  }
  if (end == 0 || std::isdigit(static_cast<unsigned char>(line[0]))) {
    return false;
  }
  if (end != line.size() && line[end] != ':') return false;
  *type = std::string(line.substr(0, end));
  return true;
}

std::string Excerpt(const std::vector<absl::string_view>& lines, size_t from,
                    size_t to, size_t max_lines) {
  const size_t start = to - from > max_lines ? to - max_lines : from;
  return absl::StrJoin(lines.begin() + static_cast<std::ptrdiff_t>(start),
                       lines.begin() + static_cast<std::ptrdiff_t>(to), "\n");
}

FailureCause Decide(bool restart, std::string rule, FailureCause cause) {
  cause.restart = restart;
  cause.rule = std::move(rule);
  return cause;
}

// The auto policy over a failure whose exception was read.
FailureCause ClassifyException(FailureCause cause) {
  // A copy: `cause` moves into the decision.
  const std::string type = cause.exception.type;
  // The exception's own lines, not the whole stderr: a start-up warning
  // about a refused connection must not make a KeyError retryable.
  const std::string message = cause.exception.excerpt.substr(
      std::min(cause.exception.excerpt.size(),
               cause.exception.excerpt.rfind(cause.exception.line)));
  if (absl::StrContains(message, kDeviceAssert)) {
    return Decide(false, "a CUDA device-side assert is a programming error",
                  std::move(cause));
  }
  if (const TextRule* rule = MatchTextRule(message)) {
    cause.peer_communication = rule->peer;
    cause.infrastructure = true;
    return Decide(true, absl::StrCat(type, " is ", rule->name),
                  std::move(cause));
  }
  if (Contains(kConnectionErrors, ShortType(type))) {
    cause.peer_communication = true;
    cause.infrastructure = true;
    return Decide(true, absl::StrCat(type, " is a connection or timeout error"),
                  std::move(cause));
  }
  if (Contains(kProgrammingErrors, ShortType(type))) {
    return Decide(false, absl::StrCat(type, " is a programming error"),
                  std::move(cause));
  }
  return Decide(true,
                absl::StrCat(type,
                             " is not in the table: restarting within the "
                             "budget (the same cause twice in a row stops)"),
                std::move(cause));
}

// The auto policy over a failure with no exception to read.
FailureCause ClassifyExit(const FailureEvidence& evidence, FailureCause cause) {
  // NCCL's watchdog aborts the process after saying why.
  if (const TextRule* rule = MatchTextRule(evidence.error_text)) {
    cause.peer_communication = rule->peer;
    cause.infrastructure = true;
  }
  if (evidence.term_signal != 0) {
    return Decide(true,
                  absl::StrCat("killed by ", SignalName(evidence.term_signal)),
                  std::move(cause));
  }
  if (evidence.exit_code >= 128) {
    return Decide(true,
                  absl::StrCat("exit code ", evidence.exit_code,
                               " is retryable (128-255)"),
                  std::move(cause));
  }
  return Decide(false,
                absl::StrCat("exit code ", evidence.exit_code,
                             " with no exception in its error file or stderr "
                             "is permanent (1-127)"),
                std::move(cause));
}

// Decisions every policy shares: the user's code lists, exec failures,
// hangs and OOM kills. False when none applies.
bool Overridden(const FailureEvidence& evidence, const CausePolicy& policy,
                FailureCause* cause) {
  const int code = evidence.exit_code;
  if (policy.permanent_exit_codes.count(code) != 0) {
    *cause = Decide(
        false,
        absl::StrCat("exit code ", code, " is in --permanent-exit-codes"),
        std::move(*cause));
  } else if (policy.retryable_exit_codes.count(code) != 0) {
    *cause = Decide(
        true, absl::StrCat("exit code ", code, " is in --retryable-exit-codes"),
        std::move(*cause));
  } else if (evidence.exec_failed) {
    *cause =
        Decide(false, "the command could not be executed", std::move(*cause));
  } else if (evidence.hang) {
    *cause = Decide(true, "a hang", std::move(*cause));
  } else if (evidence.oom) {
    *cause = Decide(true, "an OOM kill", std::move(*cause));
  } else {
    return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<RestartPolicy> ParseRestartPolicy(absl::string_view text) {
  if (text == "auto") return RestartPolicy::kAuto;
  if (text == "any") return RestartPolicy::kAny;
  if (text == "classes") return RestartPolicy::kClasses;
  return absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is not one of auto, any, classes"));
}

const char* RestartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kAuto:
      return "auto";
    case RestartPolicy::kAny:
      return "any";
    case RestartPolicy::kClasses:
      return "classes";
  }
  return "auto";
}

absl::StatusOr<ErrorPattern> ErrorPattern::Compile(absl::string_view pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const RE2>(
      re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", pattern, "' is not a valid RE2 pattern: ", re->error()));
  }
  ErrorPattern p;
  p.pattern_ = std::string(pattern);
  p.re_ = std::move(re);
  return p;
}

bool ErrorPattern::Matches(absl::string_view text) const {
  return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re_);
}

PythonException FindPythonException(absl::string_view text, size_t max_lines) {
  PythonException found;
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  size_t header = lines.size();
  for (size_t i = lines.size(); i-- > 0;) {
    if (absl::StartsWith(lines[i], "Traceback (most recent call last)")) {
      header = i;
      break;
    }
  }
  if (header == lines.size()) return found;
  // The frames are indented; the first line that is not ends them.
  size_t i = header + 1;
  while (i < lines.size() && (lines[i].empty() || lines[i][0] == ' ')) ++i;
  if (i == lines.size() || !IsExceptionLine(lines[i], &found.type)) {
    found.type.clear();
    return found;
  }
  found.line = std::string(absl::StripTrailingAsciiWhitespace(lines[i]));
  // A message may go on over several lines, up to a blank one.
  size_t end = i + 1;
  while (end < lines.size() && !lines[end].empty() && end - i < 8) ++end;
  found.excerpt = Excerpt(lines, header + 1, end, max_lines);
  return found;
}

FailureCause ClassifyFailure(const FailureEvidence& evidence,
                             const CausePolicy& policy) {
  FailureCause cause;
  cause.exception = FindPythonException(evidence.error_text);
  if (Overridden(evidence, policy, &cause)) return cause;
  const ErrorPattern* pattern = nullptr;
  for (const ErrorPattern& p : policy.retryable_patterns) {
    if (p.Matches(evidence.error_text)) {
      pattern = &p;
      break;
    }
  }
  FailureCause by_cause =
      pattern != nullptr
          ? Decide(true,
                   absl::StrCat("it matches --retryable-error-pattern '",
                                pattern->pattern(), "'"),
                   std::move(cause))
      : cause.exception.type.empty() ? ClassifyExit(evidence, std::move(cause))
                                     : ClassifyException(std::move(cause));
  switch (policy.policy) {
    case RestartPolicy::kAuto:
      return by_cause;
    case RestartPolicy::kAny:
      by_cause.restart = true;
      by_cause.rule = absl::StrCat(
          by_cause.rule, "; --restart-policy any restarts every failure");
      return by_cause;
    case RestartPolicy::kClasses:
      by_cause.restart = evidence.exit_code >= 128;
      by_cause.rule = absl::StrCat("exit code ", evidence.exit_code, " is ",
                                   by_cause.restart ? "retryable" : "permanent",
                                   " (--restart-policy classes)");
      return by_cause;
  }
  return by_cause;
}

}  // namespace distjob
