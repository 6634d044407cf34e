#include "agent/progress_health.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace distjob {

HttpAnswer ProgressAnswer(const ProgressSnapshot& progress, absl::Time now,
                          absl::Duration window) {
  if (!progress.running) return {200, "ok: no workers running\n"};
  const absl::Duration age =
      std::max(now - progress.last_progress, absl::ZeroDuration());
  const std::string shown =
      absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(100)));
  if (age <= window) {
    return {200, absl::StrCat("ok: last progress ", shown, " ago\n")};
  }
  return {503,
          absl::StrCat("no progress: last progress ", shown, " ago, more than ",
                       absl::FormatDuration(window), "\n")};
}

absl::StatusOr<std::unique_ptr<HttpServer>> StartProgressHealth(
    const ObservabilityOptions& options,
    const SupervisorInterface* supervisor) {
  if (options.health_check_port == 0) return nullptr;
  HttpServerOptions http;
  http.port = options.health_check_port;
  http.port_flag = "--health-check-port (TORCHELASTIC_HEALTH_CHECK_PORT)";
  const absl::Duration window = options.health_progress_window;
  http.answer_all = [supervisor, window] {
    return ProgressAnswer(supervisor->Progress(), absl::Now(), window);
  };
  return HttpServer::Start(http, /*metrics=*/nullptr);
}

}  // namespace distjob
