#include "observability/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/console_writer.h"
#include "common/files.h"
#include "common/logging.h"

namespace distjob {
namespace {

constexpr absl::string_view kFilePrefix = "file:";

}  // namespace

absl::Status ValidateEventLogHandler(absl::string_view spec) {
  if (spec == "null" || spec == "console") return absl::OkStatus();
  if (absl::StartsWith(spec, kFilePrefix) && spec.size() > kFilePrefix.size()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", spec, "' is not one of null, console, file:PATH"));
}

EventLog::~EventLog() {
  absl::MutexLock lock(&mu_);
  if (owned_ && out_ != nullptr) std::fclose(out_);
}

absl::Status EventLog::Open(absl::string_view spec) {
  if (absl::Status valid = ValidateEventLogHandler(spec); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--event-log-handler: ", valid.message()));
  }
  absl::MutexLock lock(&mu_);
  if (spec == "null") return absl::OkStatus();
  if (spec == "console") {
    out_ = stderr;
    return absl::OkStatus();
  }
  const std::string path(spec.substr(kFilePrefix.size()));
  // Non-blocking: a FIFO there is a warning and no event log, never a
  // start (or an event) that waits for its reader.
  absl::StatusOr<int> fd =
      OpenOutputFile("--event-log-handler", path, O_APPEND);
  if (absl::IsFailedPrecondition(fd.status())) {
    DJ_LOG_WARNING("{}", fd.status().message());
    return absl::OkStatus();
  }
  if (!fd.ok()) return absl::InvalidArgumentError(fd.status().message());
  std::FILE* file = fdopen(*fd, "a");
  if (file == nullptr) {
    const int error = errno;
    close(*fd);
    return absl::InvalidArgumentError(
        absl::StrCat(FileLabel("--event-log-handler", path),
                     ": cannot open: ", std::strerror(error)));
  }
  out_ = file;
  owned_ = true;
  path_ = path;
  return absl::OkStatus();
}

void EventLog::SetContext(const std::string& key, Json value) {
  absl::MutexLock lock(&mu_);
  context_[key] = std::move(value);
}

void EventLog::Emit(const std::string& event, const Json& fields) {
  absl::MutexLock lock(&mu_);
  if (out_ == nullptr) return;
  Json line = Json::object();
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                  absl::UTCTimeZone());
  line["event"] = event;
  for (const auto& [key, value] : context_.items()) line[key] = value;
  for (const auto& [key, value] : fields.items()) line[key] = value;
  const std::string text = DumpJson(line) + "\n";
  if (out_ == stderr) {
    // As the agent's own log: a console nobody reads costs event lines,
    // never the agent loop that emits them.
    ConsoleWriter::Stderr().Write(text);
    return;
  }
  // One write(2) per line (the file is opened for appending), so a crash
  // loses no event and lines from two agents appending to one file do not
  // interleave.
  const int fd = fileno(out_);
  for (absl::string_view rest = text; !rest.empty();) {
    const ssize_t n = write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      NoteLost(n < 0 ? errno : ENOSPC);
      break;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

void EventLog::NoteLost(int error) {
  ++lost_;
  const absl::Time now = absl::Now();
  if (now - last_warning_ < absl::Minutes(1)) return;
  last_warning_ = now;
  DJ_LOG_WARNING(
      "--event-log-handler file:{}: {} event line(s) lost: {} (warned once a "
      "minute)",
      path_, lost_, std::strerror(error));
  lost_ = 0;
}

}  // namespace distjob
