#include "agent/cli/observability_flags.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/duration.h"
#include "observability/event_log.h"

namespace distjob {

void AddObservabilityFlags(FlagSet* flags, RunOptions* options) {
  ObservabilityOptions* o = &options->observability;
  flags->Add(AgentFlag(
      "metrics-port", "PORT",
      "Serve HTTP /metrics (Prometheus text format), /healthz and /readyz "
      "on this port on all interfaces, IPv4 and IPv6; 0 (default) serves "
      "nothing.",
      SetInt(&o->metrics_port, 0, 65535)));
  flags->Add(AgentFlag(
      "metrics-tls-cert", "PATH",
      "Serve --metrics-port over HTTPS only, with this PEM certificate "
      "(chain); needs --metrics-tls-key.",
      SetString(&o->metrics_tls_cert)));
  flags->Add(AgentFlag("metrics-tls-key", "PATH",
                       "The PEM private key of --metrics-tls-cert.",
                       SetString(&o->metrics_tls_key)));
  flags->Add(AgentFlag(
      "metrics-timeout", "SECONDS",
      "A --metrics-port client that sends no complete request, or reads no "
      "answer, in this long (from when it connected or its last request "
      "arrived, however slowly its bytes come) is disconnected, as is an "
      "idle keep-alive connection (default 5; more than 0, at most 300).",
      [o](absl::string_view v, absl::string_view) {
        auto d = ParseDuration(v, "value");
        if (!d.ok()) return d.status();
        if (*d <= absl::ZeroDuration() || *d > absl::Seconds(300)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "'", v, "' is not more than 0 and at most 300 seconds"));
        }
        o->metrics_timeout = *d;
        return absl::OkStatus();
      }));
  Flag check_port = AgentFlag(
      "health-check-port", "PORT",
      "HTTP on this port (all interfaces): 200 while the workers showed "
      "progress (FileTimer requests, heartbeats) within "
      "--health-progress-window, 503 with its age otherwise; 0 (default) "
      "serves nothing (default $TORCHELASTIC_HEALTH_CHECK_PORT).",
      SetInt(&o->health_check_port, 0, 65535));
  check_port.env.push_back("TORCHELASTIC_HEALTH_CHECK_PORT");
  flags->Add(std::move(check_port));
  flags->Add(
      AgentFlag("health-progress-window", "SECONDS",
                "How recent the workers' last progress must be for "
                "--health-check-port to answer 200 (default 60; more than 0).",
                [o](absl::string_view v, absl::string_view) {
                  auto d = ParseDuration(v, "value");
                  if (!d.ok()) return d.status();
                  if (*d <= absl::ZeroDuration()) {
                    return absl::InvalidArgumentError(
                        absl::StrCat("'", v, "' is not more than 0 seconds"));
                  }
                  o->health_progress_window = *d;
                  return absl::OkStatus();
                }));
  flags->Add(AgentFlag("log-format", "text|json",
                       "The agent's own log lines: text (default) or one "
                       "JSON object a line with time, level, message, pid, "
                       "job, role, node_rank, round and attempt.",
                       SetParsed(&o->log_format, ParseLogFormat)));
  flags->Add(AgentFlag("worker-log-format", "text|json",
                       "Worker lines --tee copies to the console: text "
                       "(default, with the line prefix) or one JSON object "
                       "a line with rank, local_rank, stream and line; "
                       "files under --log-dir keep the raw bytes.",
                       SetParsed(&o->worker_log_format, ParseLogFormat)));
  flags->Add(TorchrunFlag(
      "event-log-handler", "null|console|file:PATH",
      "Where lifecycle events go, one JSON object a line: null (default, "
      "none), console (stderr) or file:PATH (appended).",
      [o](absl::string_view v, absl::string_view) {
        if (absl::Status valid = ValidateEventLogHandler(v); !valid.ok()) {
          return valid;
        }
        o->event_log_handler = std::string(v);
        return absl::OkStatus();
      }));
}

}  // namespace distjob
