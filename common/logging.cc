#include "common/logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/sink.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/console_writer.h"
#include "common/json.h"

namespace distjob {
namespace {

absl::Mutex context_mu(absl::kConstInit);
Json* context ABSL_GUARDED_BY(context_mu) = nullptr;

const char* LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warning";
    case spdlog::level::err:
    case spdlog::level::critical:
      return "error";
    default:
      return "off";
  }
}

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

// One JSON object per line on stderr, through the same ConsoleWriter. The
// message is whatever the call formatted; invalid UTF-8 in it (a worker's bytes
// quoted in an error) becomes U+FFFD rather than an unparseable line. A plain
// sink, not base_sink<>: it formats nothing with spdlog's pattern machinery,
// which would only add to the static binary.
class JsonStderrSink : public spdlog::sinks::sink {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    Json line = Json::object();
    line["time"] =
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time),
                         absl::UTCTimeZone());
    line["level"] = LevelName(msg.level);
    line["message"] =
        ValidUtf8(absl::string_view(msg.payload.data(), msg.payload.size()));
    line["pid"] = static_cast<int64_t>(getpid());
    {
      absl::MutexLock lock(&context_mu);
      if (context != nullptr) {
        for (const auto& [key, value] : context->items()) line[key] = value;
      }
    }
    const std::string text = DumpJson(line) + "\n";
    // One write per line: threads' lines do not interleave.
    std::lock_guard<std::mutex> lock(mu_);
    ConsoleWriter::Stderr().Write(text);
  }
  void flush() override {}
  void set_pattern(const std::string&) override {}
  void set_formatter(std::unique_ptr<spdlog::formatter>) override {}

 private:
  std::mutex mu_;
};

void SetContextValue(const std::string& key, Json value) {
  absl::MutexLock lock(&context_mu);
  if (context == nullptr) context = new Json(Json::object());
  (*context)[key] = std::move(value);
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is not one of: text, json"));
}

void SetLogContext(const std::string& key, const std::string& value) {
  SetContextValue(key, value);
}

void SetLogContext(const std::string& key, int64_t value) {
  SetContextValue(key, value);
}

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

void InitLogging(LogLevel level, LogFormat format) {
  // Unbuffered stderr, no colours: the agent's stderr is a container log.
  spdlog::drop("distjob-agent");
  std::shared_ptr<spdlog::logger> logger;
  if (format == LogFormat::kJson) {
    logger = std::make_shared<spdlog::logger>(
        "distjob-agent", std::make_shared<JsonStderrSink>());
  } else {
    logger = std::make_shared<spdlog::logger>("distjob-agent",
                                              std::make_shared<ConsoleSink>());
    logger->set_pattern("[%Y-%m-%dT%H:%M:%S.%e distjob-agent %P %^%l%$] %v");
  }
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
