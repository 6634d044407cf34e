#include "agent/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/text.h"
#include "supervisor/signal_names.h"

namespace distjob {
namespace {

// Length of the UTF-8 sequence that starts with lead byte `c` in text that
// ValidUtf8 has already cleaned.
size_t Utf8SequenceLength(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  return 2;
}

// A worker's error file is the worker's to write: read at most this much
// of it, so a runaway one cannot exhaust the agent's memory.
constexpr size_t kMaxErrorFileBytes = size_t{1} << 20;

// Opened non-blocking: a FIFO there (with or without a reader) is refused
// at once, never an exit that waits on it.
absl::Status WriteOutputFile(absl::string_view named_by,
                             const std::string& path, absl::string_view data) {
  absl::StatusOr<int> opened = OpenOutputFile(named_by, path, O_TRUNC);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return ErrnoError(err, absl::StrCat("write ", path));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return ErrnoError(errno, absl::StrCat("close ", path));
  return absl::OkStatus();
}

std::string SignalText(int sig) {
  return absl::StrCat(SignalName(sig), " (", sig, ")");
}

}  // namespace

std::string Utf8Truncate(absl::string_view text, size_t limit) {
  // One validator for the error file and the termination message: the
  // JSON writer's, which also refuses surrogates, overlong forms and code
  // points beyond U+10FFFF (common/json.h).
  const std::string clean = ValidUtf8(text);
  size_t end = 0;
  while (end < clean.size()) {
    const size_t n = Utf8SequenceLength(static_cast<unsigned char>(clean[end]));
    if (end + n > limit || end + n > clean.size()) break;
    end += n;
  }
  return clean.substr(0, end);
}

std::string StoppedWhileWaiting(int signal_number, absl::string_view what) {
  what = absl::StripPrefix(what, "stopped while waiting for ");
  if (what.empty())
    return absl::StrCat("stopped by ", SignalName(signal_number));
  return absl::StrCat("stopped by ", SignalName(signal_number),
                      " while waiting for ", what);
}

std::string FormatTerminationMessage(const RunReport& r) {
  std::string head =
      absl::StrCat("distjob-agent: ", r.outcome, " exit_code=", r.exit_code);
  if (r.stop_signal != 0) {
    absl::StrAppend(&head, " stopped_by=", SignalText(r.stop_signal));
  }
  absl::StrAppend(&head, " restarts=", r.restarts, "/", r.max_restarts,
                  " oom=", r.oom ? "true" : "false",
                  " hang=", r.hang ? "true" : "false", "\n");
  if (!r.diagnostics.empty()) {
    absl::StrAppend(&head, "diagnostics: ", r.diagnostics, "\n");
  }
  std::string body;
  if (!r.detail.empty()) absl::StrAppend(&body, r.detail, "\n");
  if (r.root_cause.has_value()) {
    const RootCause& c = *r.root_cause;
    absl::StrAppend(&body, "root cause: local_rank=", c.local_rank,
                    " pid=", c.pid, " exit_code=", c.exit_code);
    if (c.term_signal != 0) {
      absl::StrAppend(&body, " signal=", SignalText(c.term_signal));
    }
    absl::StrAppend(&body, " at ", absl::FormatTime(c.time));
    if (c.rank >= 0) absl::StrAppend(&body, " rank=", c.rank);
    if (!c.host.empty()) absl::StrAppend(&body, " host=", c.host);
    absl::StrAppend(&body, "\n");
    if (!c.reason.empty()) absl::StrAppend(&body, c.reason, "\n");
    if (!c.exception.empty()) {
      absl::StrAppend(&body, "exception: ", c.exception, "\n");
    }
    if (!c.decision.empty())
      absl::StrAppend(&body, "decision: ", c.decision, "\n");
    if (!c.logs.empty()) absl::StrAppend(&body, "logs: ", c.logs, "\n");
    // Who failed always fits; only the error text is cut.
    absl::StrAppend(&head, body);
    body.clear();
    std::string error = ReadWorkerErrorMessage(c.error_file);
    if (error.empty()) error = c.traceback;
    if (!error.empty()) absl::StrAppend(&body, "error: ", error, "\n");
  }
  const std::string safe_head = Utf8Truncate(head, kTerminationMessageLimit);
  const size_t room = kTerminationMessageLimit - safe_head.size();
  std::string clean_body = ValidUtf8(body);
  if (clean_body.size() > room && room <= 3) {
    clean_body.clear();
  } else if (clean_body.size() > room) {
    // The end of an error holds the exception; keep the tail.
    constexpr absl::string_view kCut = "...";
    size_t start = clean_body.size() - (room - kCut.size());
    while (start < clean_body.size() &&
           (static_cast<unsigned char>(clean_body[start]) & 0xC0) == 0x80) {
      ++start;
    }
    clean_body = absl::StrCat(kCut, clean_body.substr(start));
  }
  return safe_head + clean_body;
}

std::string FormatRootCauseBlock(const RootCause& c) {
  std::string block = "=== distjob-agent: root cause ===\n";
  absl::StrAppend(&block, c.rank >= 0 ? absl::StrCat("rank ", c.rank, " ") : "",
                  "(local_rank ", c.local_rank, ")",
                  c.host.empty() ? "" : absl::StrCat(" on host ", c.host),
                  ", pid ", c.pid, ": ");
  if (c.term_signal != 0) {
    absl::StrAppend(&block, "killed by ", SignalText(c.term_signal), "\n");
  } else {
    absl::StrAppend(&block, "exit code ", c.exit_code, "\n");
  }
  if (!c.reason.empty()) absl::StrAppend(&block, c.reason, "\n");
  if (!c.traceback.empty()) {
    absl::StrAppend(&block, c.traceback, "\n");
  } else if (!c.exception.empty()) {
    absl::StrAppend(&block, c.exception, "\n");
  }
  if (!c.decision.empty())
    absl::StrAppend(&block, "decision: ", c.decision, "\n");
  if (!c.logs.empty()) absl::StrAppend(&block, "logs: ", c.logs, "\n");
  absl::StrAppend(&block, "=================================\n");
  return ValidUtf8(block);
}

std::string EndReason(const RunReport& report) {
  std::string reason = FormatTerminationMessage(report);
  absl::StrReplaceAll({{"\n", "; "}}, &reason);
  while (absl::EndsWith(reason, "; ")) reason.resize(reason.size() - 2);
  // The root cause's rank, host, exception and decision fit; its
  // traceback may be cut.
  constexpr size_t kLimit = 1024;
  return reason.size() > kLimit ? Utf8Truncate(reason, kLimit) + "..." : reason;
}

std::optional<int> EndedJobExitCode(absl::string_view message) {
  constexpr absl::string_view kHead = "distjob-agent: ";
  const size_t head = message.find(kHead);
  if (head == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = message.substr(head + kHead.size());
  rest = rest.substr(0, rest.find('\n'));
  constexpr absl::string_view kCode = " exit_code=";
  const size_t at = rest.find(kCode);
  if (at == absl::string_view::npos) return std::nullopt;
  rest.remove_prefix(at + kCode.size());
  int code = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &code) || code < 0 ||
      code > 255) {
    return std::nullopt;
  }
  return code;
}

void WarnOfUnwritableOutputs(const std::string& termination_log,
                             const std::string& error_file) {
  if (!termination_log.empty()) {
    absl::Status s = CheckOutputFile("--termination-log", termination_log);
    if (!s.ok()) DJ_LOG_WARNING("{}", s.message());
  }
  if (!error_file.empty()) {
    absl::Status s = CheckOutputFile("--error-file", error_file);
    if (!s.ok()) DJ_LOG_WARNING("{}", s.message());
  }
}

absl::Status WriteTerminationMessage(const std::string& path,
                                     absl::string_view message) {
  return WriteOutputFile("--termination-log", path, message);
}

namespace {

// The worker's error file, "" when it has none. A worker names this path,
// so anything but a regular file there (a FIFO would block PID 1) is
// refused with a warning.
std::string ReadWorkerErrorFile(const std::string& error_file) {
  absl::StatusOr<std::string> text =
      ReadSmallRegularFile(error_file, kMaxErrorFileBytes);
  if (text.ok()) return *std::move(text);
  if (!absl::IsNotFound(text.status())) {
    DJ_LOG_WARNING("Worker error file: {}", text.status().message());
  }
  return "";
}

}  // namespace

std::string ReadWorkerErrorMessage(const std::string& error_file) {
  if (error_file.empty()) return "";
  const std::string json = ReadWorkerErrorFile(error_file);
  if (json.empty()) return "";
  auto root = ParseJson(ValidUtf8(json), error_file);
  // Not torchelastic's shape: the raw text is still useful.
  if (!root.ok() || !root->is_object()) return json;
  auto it = root->find("message");
  if (it == root->end()) return json;
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_object()) return json;
  std::string text;
  if (auto m = it->find("message"); m != it->end() && m->is_string()) {
    text = m->get<std::string>();
  }
  if (auto extra = it->find("extraInfo");
      extra != it->end() && extra->is_object()) {
    if (auto stack = extra->find("py_callstack");
        stack != extra->end() && stack->is_string()) {
      absl::StrAppend(&text, "\n", stack->get<std::string>());
    }
  }
  return text;
}

absl::Status WriteRootCauseErrorFile(const std::string& path,
                                     const RootCause& cause) {
  Json root;
  if (!cause.error_file.empty()) {
    // A worker's bytes need not be UTF-8; its message is kept, with
    // U+FFFD where they were not.
    auto worker = ParseJson(ValidUtf8(ReadWorkerErrorFile(cause.error_file)),
                            cause.error_file);
    if (worker.ok() && worker->is_object() && worker->contains("message") &&
        (*worker)["message"].is_object()) {
      root = *std::move(worker);
    }
  }
  if (root.is_null()) {
    std::string text =
        !cause.exception.empty() ? cause.exception
        : cause.reason.empty()
            ? (cause.term_signal != 0
                   ? absl::StrCat("Signal ", cause.term_signal, " (",
                                  SignalName(cause.term_signal),
                                  ") received by PID ", cause.pid)
                   : absl::StrCat("local_rank ", cause.local_rank, " (pid ",
                                  cause.pid, ") exited with code ",
                                  cause.exit_code))
            : cause.reason;
    root = Json{
        {"message",
         {{"message", std::move(text)},
          {"extraInfo",
           {{"py_callstack", cause.traceback},
            {"timestamp", absl::StrCat(absl::ToUnixSeconds(cause.time))}}}}}};
  }
  root["message"]["errorCode"] = cause.exit_code;
  return WriteOutputFile("--error-file", path, DumpJson(root));
}

RunReport MakeRunReport(const std::string& outcome, int exit_code, int restarts,
                        int max_restarts) {
  RunReport report;
  report.outcome = outcome;
  report.exit_code = exit_code;
  report.restarts = restarts;
  report.max_restarts = max_restarts;
  return report;
}

void PublishReport(const RunReport& report, const std::string& termination_log,
                   const std::string& error_file) {
  const std::string message = FormatTerminationMessage(report);
  // The kubelet falls back to the log tail when the file is empty: the
  // summary line is also the agent's last log line.
  DJ_LOG_INFO("{}", message.substr(0, message.find('\n')));
  if (!termination_log.empty()) {
    absl::Status written = WriteTerminationMessage(termination_log, message);
    if (!written.ok()) {
      DJ_LOG_DEBUG("no termination message: {}", written);
    }
  }
  if (!error_file.empty() && report.root_cause.has_value()) {
    absl::Status written =
        WriteRootCauseErrorFile(error_file, *report.root_cause);
    if (!written.ok()) DJ_LOG_WARNING("no error file: {}", written);
  }
}

}  // namespace distjob
