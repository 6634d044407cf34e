#include "common/logging.h"

#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/console_writer.h"

namespace distjob {
namespace {

// stderr through the shared ConsoleWriter: a log reader that went away or
// stopped reading costs a log line, never the supervision of the workers.
class ConsoleSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    ConsoleWriter::Stderr().Write(
        absl::string_view(formatted.data(), formatted.size()));
  }
  void flush_() override {}
};

}  // namespace

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
  auto logger = std::make_shared<spdlog::logger>(
      "distjob-agent", std::make_shared<ConsoleSink>());
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
