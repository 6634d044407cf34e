#include "agent/cli/preflight_flags.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace distjob {
namespace {

FlagSetter Append(std::vector<std::string>* out) {
  return [out](absl::string_view v, absl::string_view) {
    out->emplace_back(v);
    return absl::OkStatus();
  };
}

}  // namespace

void AddPreflightFlags(FlagSet* flags, RunPreflightOptions* options) {
  RunPreflightOptions* o = options;
  flags->Add(AgentFlag(
      "preflight", "",
      "Before discovery waits, run `distjob-agent preflight`'s checks on "
      "MASTER_ADDR, the peers, the c10d endpoint (unless this node hosts it) "
      "and the --check-path/--check-writable/--health-daemon given: fatal "
      "exits 2, retryable 138, a warning is logged.",
      SetBool(&o->enabled), /*is_bool=*/true));
  flags->Add(AgentFlag("check-path", "PATH",
                       "With --preflight: stat, then list (a directory) or "
                       "read 4 KiB of (a file) PATH (repeatable).",
                       Append(&o->paths)));
  flags->Add(AgentFlag("check-writable", "DIR",
                       "With --preflight: create and remove a file in DIR "
                       "(repeatable).",
                       Append(&o->writable_paths)));
  flags->Add(AgentFlag(
      "health-daemon", "unix:///PATH",
      "With --preflight: call nvhcd.HealthCheckService/RunHealthCheck on "
      "this Unix socket; healthy when its output says {\"fail_count\":0}.",
      [o](absl::string_view v, absl::string_view) {
        if (!absl::StartsWith(v, "unix:") || v.size() <= 5) {
          return absl::InvalidArgumentError(
              absl::StrCat("'", v, "' is not unix:///PATH (a Unix socket)"));
        }
        o->health_daemon = std::string(v);
        return absl::OkStatus();
      }));
}

absl::Status CheckPreflightOptions(const RunPreflightOptions& options) {
  if (options.enabled) return absl::OkStatus();
  const char* given = !options.paths.empty()            ? "--check-path"
                      : !options.writable_paths.empty() ? "--check-writable"
                      : !options.health_daemon.empty()  ? "--health-daemon"
                                                        : nullptr;
  if (given == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(given, " is a check of --preflight, which is not given"));
}

}  // namespace distjob
