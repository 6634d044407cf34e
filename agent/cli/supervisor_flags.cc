#include "agent/cli/supervisor_flags.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/duration.h"
#include "common/environment.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/text.h"
#include "supervisor/exit_policy.h"
#include "supervisor/failure_cause.h"
#include "supervisor/signal_names.h"

namespace distjob {

void AddSupervisorFlags(FlagSet* flags, RunOptions* options) {
  SupervisorOptions* s = &options->supervisor;
  OutcomeOptions* o = &options->outcome;
  flags->Add(AgentFlag("termination-log", "PATH",
                       "Where the outcome is written on exit (default "
                       "/dev/termination-log; skipped if not writable).",
                       SetString(&o->termination_log)));
  Flag error_file = AgentFlag(
      "error-file", "PATH",
      "Where the root-cause worker error is written in torchelastic's JSON "
      "shape, with errorCode (default $TORCHELASTIC_ERROR_FILE; none if "
      "unset).",
      SetString(&o->error_file));
  error_file.env.push_back("TORCHELASTIC_ERROR_FILE");
  flags->Add(std::move(error_file));
  flags->Add(AgentFlag(
      "restart-backoff", "SECONDS",
      "Pause before the first restart, doubled on each further one (default "
      "0).",
      SetDuration(&o->restart_backoff)));
  flags->Add(AgentFlag("restart-backoff-max", "SECONDS",
                       "Upper bound of the restart pause (default 60).",
                       SetDuration(&o->restart_backoff_max)));
  flags->Add(AgentFlag("permanent-exit-codes", "CODE[,LO-HI...]",
                       "Exit codes never restarted, whatever their class.",
                       SetParsed(&o->permanent_exit_codes, ParseExitCodeList)));
  flags->Add(AgentFlag("retryable-exit-codes", "CODE[,LO-HI...]",
                       "Exit codes restarted, whatever their class.",
                       SetParsed(&o->retryable_exit_codes, ParseExitCodeList)));
  flags->Add(AgentFlag(
      "restart-policy", "auto|any|classes",
      "auto (default; any when invoked as torchrun): restart by cause "
      "(signals, OOM kills, hangs, communication, network and CUDA errors "
      "restart; programming errors and the same cause twice in a row stop); "
      "any: restart every failure, as torchrun does; classes: by exit code "
      "alone (128-255 restart).",
      [o](absl::string_view v, absl::string_view) -> absl::Status {
        auto policy = ParseRestartPolicy(v);
        if (!policy.ok()) return policy.status();
        o->restart_policy = *policy;
        return absl::OkStatus();
      }));
  flags->Add(AgentFlag(
      "retryable-error-pattern", "REGEX",
      "Repeatable: a worker failure whose error (error file, else the end of "
      "its stderr) matches this RE2 pattern restarts under "
      "--restart-policy auto.",
      [o](absl::string_view v, absl::string_view) -> absl::Status {
        auto pattern = ErrorPattern::Compile(v);
        if (!pattern.ok()) return pattern.status();
        o->retryable_error_patterns.push_back(*std::move(pattern));
        return absl::OkStatus();
      }));
  // Not DISTJOB_PROGRESS_FILE: the agent exports that name to its workers
  // (the Trainer status push), and an agent a worker starts must not read
  // it as this flag.
  Flag progress_file = AgentFlag(
      "progress-file", "PATH",
      "A file the training updates as it progresses (e.g. its checkpoint "
      "iteration): an attempt that creates, modifies or touches it made "
      "progress (see --max-no-progress-restarts).",
      [o](absl::string_view v, absl::string_view) -> absl::Status {
        // Only its mtime and first bytes are read, each attempt; what is
        // there at start must already be a file that cannot block a read.
        struct stat st;
        const std::string path(v);
        if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
          return absl::InvalidArgumentError(
              absl::StrCat(QuoteForMessage(path), " is ", FileKind(st.st_mode),
                           ", not a regular file"));
        }
        o->progress_file = path;
        return absl::OkStatus();
      });
  progress_file.env = {"DISTJOB_TRAINING_PROGRESS_FILE"};
  flags->Add(std::move(progress_file));
  flags->Add(AgentFlag(
      "max-no-progress-restarts", "N",
      "End the job with exit 81 (permanent, on every node) once N "
      "consecutive attempts failed without progress: no heartbeat, FileTimer "
      "request or --progress-file change (default 0: never).",
      SetInt(&o->max_no_progress_restarts, 0, 1000000)));
  flags->Add(AgentFlag(
      "device-release-timeout", "SECONDS",
      "Before a restart, the previous attempt's processes still holding an "
      "accelerator's device file are killed and waited for this long "
      "(default 30).",
      SetDuration(&o->device_release_timeout)));
  flags->Add(AgentFlag(
      "device-release-timeout-action", "start|stop",
      "Past --device-release-timeout: start the attempt anyway with a "
      "warning (default), or stop with the retryable exit 138.",
      [o](absl::string_view v, absl::string_view) -> absl::Status {
        if (v != "start" && v != "stop") {
          return absl::InvalidArgumentError(
              absl::StrCat("must be start or stop, not ", QuoteForMessage(v)));
        }
        o->device_release_stop = v == "stop";
        return absl::OkStatus();
      }));
  flags->Add(AgentFlag(
      "device-files", "GLOB[,GLOB...]",
      "The device files that pin an accelerator (default "
      "/dev/nvidia*,/dev/dri/*,/dev/kfd,/dev/accel*).",
      [s](absl::string_view v, absl::string_view) -> absl::Status {
        s->device_patterns = absl::StrSplit(v, ',', absl::SkipEmpty());
        if (s->device_patterns.empty()) {
          return absl::InvalidArgumentError("names no device file");
        }
        return absl::OkStatus();
      }));
  flags->Add(AgentFlag(
      "hang-timeout", "SECONDS",
      "Hang watchdog: each worker must touch $DISTJOB_HEARTBEAT_FILE at "
      "least this often, or it is stopped as a retryable 'hang' failure "
      "(default 0: off).",
      SetDuration(&s->hang_timeout)));
  flags->Add(AgentFlag("first-heartbeat-timeout", "SECONDS",
                       "Time allowed before a worker's first heartbeat "
                       "(default twice --hang-timeout).",
                       SetDuration(&s->first_heartbeat_timeout)));
  flags->Add(AgentFlag("hang-signal", "SIG",
                       "Signal sent to every worker's process group when "
                       "one hangs, 5 s (at most the shutdown timeout) "
                       "before the group is stopped, e.g. SIGUSR1 for a "
                       "stack dump; a stopped worker is continued to take "
                       "it (default: none).",
                       SetParsed(&s->hang_signal, ParseSignal)));
  Flag file_timer = AgentFlag(
      "file-timer", "",
      "Serve torch's FileTimer (torch.distributed.elastic.timer): workers' "
      "expired timers signal the worker, and the group restarts as hung "
      "(default $TORCHELASTIC_ENABLE_FILE_TIMER).",
      SetBool(&s->file_timer), /*is_bool=*/true);
  file_timer.env.push_back("TORCHELASTIC_ENABLE_FILE_TIMER");
  flags->Add(std::move(file_timer));
  Flag timer_path = AgentFlag(
      "file-timer-path", "PATH",
      "The FileTimer's FIFO, exported to workers as TORCHELASTIC_TIMER_FILE "
      "(default $TORCHELASTIC_TIMER_FILE, else watchdog_timer_<uuid> in "
      "$TMPDIR); what is there is replaced.",
      SetString(&s->file_timer_path));
  timer_path.env.push_back("TORCHELASTIC_TIMER_FILE");
  flags->Add(std::move(timer_path));
  flags->Add(AgentFlag(
      "exit-grace", "SECONDS",
      "When the group is stopped, a worker that has already written its "
      "error file is left this long to exit with its own code before it "
      "gets the stop signal (default 2; at most the shutdown timeout).",
      SetDuration(&s->exit_grace)));
  flags->Add(AgentFlag(
      "evidence-budget", "SECONDS",
      "Before the agent stops or kills workers (a hang, an expired "
      "FileTimer, a failure, a stop signal, the end of the grace period) it "
      "records what each was doing (threads' kernel states, the answers of "
      "its TORCH_WORKER_SERVER_SOCKET) in attempt_<n>/diagnostics.json, "
      "taking at most this long (default 5; never past the grace period; 0: "
      "none).",
      SetDuration(&s->evidence_budget)));
  flags->Add(AgentFlag("health-port", "PORT",
                       "Serve grpc.health.v1.Health on this port on all "
                       "interfaces (services liveness, readiness, \"\"); 0 "
                       "(default) serves nothing.",
                       SetInt(&o->health_port, 0, 65535)));
  flags->Add(AgentFlag("log-level", "debug|info|warning|error|off",
                       "The agent's own log level (default info).",
                       SetParsed(&options->log_level, ParseLogLevel)));
}

namespace {

// A random (version 4) UUID, as Python's uuid.uuid4() writes it.
absl::StatusOr<std::string> RandomUuid() {
  uint8_t b[16];
  if (getrandom(b, sizeof(b), 0) != static_cast<ssize_t>(sizeof(b))) {
    return absl::InternalError(
        absl::StrCat("getrandom: ", std::strerror(errno)));
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);
  std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(b), sizeof(b)));
  return absl::StrCat(hex.substr(0, 8), "-", hex.substr(8, 4), "-",
                      hex.substr(12, 4), "-", hex.substr(16, 4), "-",
                      hex.substr(20));
}

}  // namespace

absl::Status ResolveFileTimerPath(const EnvMap& env,
                                  SupervisorOptions* supervisor) {
  if (!supervisor->file_timer) {
    supervisor->file_timer_path.clear();  // given, but not served
    return absl::OkStatus();
  }
  if (supervisor->file_timer_path.empty()) {
    auto uuid = RandomUuid();
    if (!uuid.ok()) return uuid.status();
    std::string dir = Lookup(env, "TMPDIR").value_or("");
    if (dir.empty()) dir = "/tmp";
    supervisor->file_timer_path = absl::StrCat(dir, "/watchdog_timer_", *uuid);
  }
  const std::string& path = supervisor->file_timer_path;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--file-timer-path (TORCHELASTIC_TIMER_FILE) ", QuoteForMessage(path),
        ": its directory ", QuoteForMessage(dir), " does not exist"));
  }
  return absl::OkStatus();
}

}  // namespace distjob
