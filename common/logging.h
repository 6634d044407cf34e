// The one logging header of the project: a thin facade over spdlog so that
// code says DJ_LOG_INFO(...) and never names the backend. Messages use fmt's
// "{}" placeholders and go to stderr, prefixed with the program name and pid
// (tini's convention), so they interleave readably with worker output.
#ifndef DISTJOB_COMMON_LOGGING_H_
#define DISTJOB_COMMON_LOGGING_H_

#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

enum class LogLevel { kDebug, kInfo, kWarning, kError, kOff };

// Accepts debug, info, warning (warn), error, off; case-insensitive.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);

// text: "[time distjob-agent pid level] message"; json: one object a line
// (time, level, message, pid and the context below), for log pipelines.
enum class LogFormat { kText, kJson };

// Accepts text, json.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text);

// Sets up the process-wide logger. Safe to call more than once.
void InitLogging(LogLevel level, LogFormat format = LogFormat::kText);

// A field every JSON line carries from now on (job, node_rank, round,
// attempt); a later call overwrites it. Text lines do not show it.
void SetLogContext(const std::string& key, const std::string& value);
void SetLogContext(const std::string& key, int64_t value);

}  // namespace distjob

// Debian's Abseil has its own string_view (not std::string_view), which fmt
// does not know; these let log calls take it, and absl::Status, directly.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(
        fmt::string_view(s.data(), s.size()), ctx);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(const absl::Status& status, Context& ctx) const {
    const std::string text = status.ToString();
    return fmt::formatter<fmt::string_view>::format(
        fmt::string_view(text.data(), text.size()), ctx);
  }
};

#define DJ_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define DJ_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define DJ_LOG_WARNING(...) ::spdlog::warn(__VA_ARGS__)
#define DJ_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)

#endif  // DISTJOB_COMMON_LOGGING_H_
