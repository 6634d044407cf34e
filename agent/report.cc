#include "agent/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "supervisor/signal_names.h"

namespace distjob {
namespace {

// Length of the valid UTF-8 sequence at `s[i]`, 0 if invalid.
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0 && c >= 0xC2)
    n = 2;
  else if ((c & 0xF0) == 0xE0)
    n = 3;
  else if ((c & 0xF8) == 0xF0 && c <= 0xF4)
    n = 4;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
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
  std::string out;
  out.reserve(std::min(text.size(), limit));
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      if (out.size() + 1 > limit) break;
      out.push_back('?');
      ++i;
      continue;
    }
    if (out.size() + n > limit) break;
    out.append(text.data() + i, n);
    i += n;
  }
  return out;
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
  std::string body;
  if (!r.detail.empty()) absl::StrAppend(&body, r.detail, "\n");
  if (r.root_cause.has_value()) {
    const RootCause& c = *r.root_cause;
    absl::StrAppend(&body, "root cause: local_rank=", c.local_rank,
                    " pid=", c.pid, " exit_code=", c.exit_code);
    if (c.term_signal != 0) {
      absl::StrAppend(&body, " signal=", SignalText(c.term_signal));
    }
    absl::StrAppend(&body, " at ", absl::FormatTime(c.time), "\n");
    if (!c.reason.empty()) absl::StrAppend(&body, c.reason, "\n");
    // Who failed always fits; only the error text is cut.
    absl::StrAppend(&head, body);
    body.clear();
    const std::string error = ReadWorkerErrorMessage(c.error_file);
    if (!error.empty()) absl::StrAppend(&body, "error: ", error, "\n");
  }
  const std::string safe_head = Utf8Truncate(head, kTerminationMessageLimit);
  const size_t room = kTerminationMessageLimit - safe_head.size();
  std::string clean_body = Utf8Truncate(body, body.size());
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

absl::Status WriteTerminationMessage(const std::string& path,
                                     absl::string_view message) {
  return WriteFileAtomically(path, message);
}

std::string ReadWorkerErrorMessage(const std::string& error_file) {
  if (error_file.empty()) return "";
  const std::string json = ReadFile(error_file);
  if (json.empty()) return "";
  google::protobuf::Struct root;
  if (!google::protobuf::util::JsonStringToMessage(json, &root).ok()) {
    return json;  // not torchelastic's shape: the raw text is still useful
  }
  auto it = root.fields().find("message");
  if (it == root.fields().end()) return json;
  if (it->second.has_string_value()) return it->second.string_value();
  if (!it->second.has_struct_value()) return json;
  const auto& message = it->second.struct_value().fields();
  std::string text;
  if (auto m = message.find("message"); m != message.end()) {
    text = m->second.string_value();
  }
  if (auto extra = message.find("extraInfo");
      extra != message.end() && extra->second.has_struct_value()) {
    const auto& info = extra->second.struct_value().fields();
    if (auto stack = info.find("py_callstack"); stack != info.end()) {
      absl::StrAppend(&text, "\n", stack->second.string_value());
    }
  }
  return text;
}

absl::Status WriteRootCauseErrorFile(const std::string& path,
                                     const RootCause& cause) {
  google::protobuf::Struct root;
  bool have_worker_json = false;
  if (!cause.error_file.empty()) {
    const std::string json = ReadFile(cause.error_file);
    have_worker_json =
        !json.empty() &&
        google::protobuf::util::JsonStringToMessage(json, &root).ok() &&
        root.fields().count("message") &&
        root.fields().at("message").has_struct_value();
  }
  if (!have_worker_json) {
    root.Clear();
    std::string text =
        cause.reason.empty()
            ? (cause.term_signal != 0
                   ? absl::StrCat("Signal ", cause.term_signal, " (",
                                  SignalName(cause.term_signal),
                                  ") received by PID ", cause.pid)
                   : absl::StrCat("local_rank ", cause.local_rank, " (pid ",
                                  cause.pid, ") exited with code ",
                                  cause.exit_code))
            : cause.reason;
    auto* message = (*root.mutable_fields())["message"].mutable_struct_value();
    (*message->mutable_fields())["message"].set_string_value(text);
    auto* extra =
        (*message->mutable_fields())["extraInfo"].mutable_struct_value();
    (*extra->mutable_fields())["py_callstack"].set_string_value("");
    (*extra->mutable_fields())["timestamp"].set_string_value(
        absl::StrCat(absl::ToUnixSeconds(cause.time)));
  }
  auto* message = (*root.mutable_fields())["message"].mutable_struct_value();
  (*message->mutable_fields())["errorCode"].set_number_value(cause.exit_code);
  std::string out;
  auto printed = google::protobuf::util::MessageToJsonString(root, &out);
  if (!printed.ok()) {
    return absl::InternalError(absl::StrCat("cannot encode the error file ",
                                            path, ": ", printed.ToString()));
  }
  return WriteFileAtomically(path, out);
}

}  // namespace distjob
