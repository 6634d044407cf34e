#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace distjob {

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "debug" || lower == "trace") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error" || lower == "critical") return LogLevel::kError;
  if (lower == "off" || lower == "none") return LogLevel::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", text,
                   "' is not one of: debug, info, warning, error, off"));
}

void InitLogging(LogLevel level) {
  // Unbuffered stderr, no colours: the agent's stderr is a container log.
  spdlog::drop("distjob-agent");
  auto logger = spdlog::stderr_logger_mt("distjob-agent");
  logger->set_pattern("[%Y-%m-%dT%H:%M:%S.%e distjob-agent %P %^%l%$] %v");
  switch (level) {
    case LogLevel::kDebug:
      logger->set_level(spdlog::level::debug);
      break;
    case LogLevel::kInfo:
      logger->set_level(spdlog::level::info);
      break;
    case LogLevel::kWarning:
      logger->set_level(spdlog::level::warn);
      break;
    case LogLevel::kError:
      logger->set_level(spdlog::level::err);
      break;
    case LogLevel::kOff:
      logger->set_level(spdlog::level::off);
      break;
  }
  logger->flush_on(spdlog::level::debug);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace distjob
