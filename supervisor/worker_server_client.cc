#include "supervisor/worker_server_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"

namespace distjob {
namespace {

// The status line and headers: anything longer is not torch's server.
constexpr size_t kMaxHead = 16 * 1024;

// Waits until `fd` is ready for `events` or `deadline` passes.
absl::Status Await(int fd, short events, absl::Time deadline,
                   const std::string& what) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": no answer in time"));
    }
    pollfd p{fd, events, 0};
    const int ms =
        static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(left)));
    const int n = poll(&p, 1, ms);
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return ErrnoError(errno, what);
  }
}

absl::Status Connect(int fd, const std::string& path, absl::Time deadline,
                     const std::string& what) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    return absl::OkStatus();
  }
  if (errno != EINPROGRESS && errno != EAGAIN) {
    return absl::UnavailableError(
        absl::StrCat(what, ": connect: ", std::strerror(errno)));
  }
  absl::Status ready = Await(fd, POLLOUT, deadline, what);
  if (!ready.ok()) return ready;
  int error = 0;
  socklen_t len = sizeof(error);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat(what, ": connect: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline,
                     const std::string& what) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return ErrnoError(errno, what);
    }
    absl::Status ready = Await(fd, POLLOUT, deadline, what);
    if (!ready.ok()) return ready;
  }
  return absl::OkStatus();
}

// The Content-Length of a complete head, -1 when it has none.
int64_t ContentLength(absl::string_view head) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      int64_t length = -1;
      line.remove_prefix(std::strlen("content-length:"));
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &length)) {
        return length;
      }
    }
  }
  return -1;
}

// Reads until the whole answer is in (its Content-Length, else the
// server's close), or the head and more than `max_body` bytes of body.
// `*full` says whether the whole answer is in.
absl::Status ReadAnswer(int fd, size_t max_body, absl::Time deadline,
                        const std::string& what, std::string* out, bool* full) {
  char buf[8192];
  *full = false;
  for (;;) {
    const size_t head_end = out->find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const size_t body = out->size() - head_end - 4;
      const int64_t length =
          ContentLength(absl::string_view(*out).substr(0, head_end));
      if (length >= 0 && body >= static_cast<uint64_t>(length)) {
        out->resize(head_end + 4 + static_cast<size_t>(length));
        *full = true;
        return absl::OkStatus();
      }
      if (body > max_body) return absl::OkStatus();
    }
    if (head_end == std::string::npos && out->size() > kMaxHead) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": an answer head over ", kMaxHead, " bytes"));
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) {
      *full = true;
      return absl::OkStatus();
    }
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (errno != EAGAIN && errno != EINTR) return ErrnoError(errno, what);
    absl::Status ready = Await(fd, POLLIN, deadline, what);
    if (!ready.ok()) return ready;
  }
}

absl::StatusOr<WorkerServerAnswer> ParseAnswer(const std::string& raw,
                                               size_t max_body, bool full,
                                               const std::string& what) {
  const size_t head_end = raw.find("\r\n\r\n");
  absl::string_view status_line =
      absl::string_view(raw).substr(0, std::min(raw.find("\r\n"), head_end));
  WorkerServerAnswer answer;
  // "HTTP/1.1 200 OK"
  if (head_end == std::string::npos ||
      !absl::ConsumePrefix(&status_line, "HTTP/1.") || status_line.size() < 5 ||
      !absl::SimpleAtoi(status_line.substr(2, 3), &answer.status)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not HTTP"));
  }
  answer.body = raw.substr(head_end + 4);
  if (answer.body.size() > max_body || !full) {
    answer.truncated = answer.body.size() > max_body || !full;
    answer.body.resize(std::min(answer.body.size(), max_body));
  }
  return answer;
}

}  // namespace

absl::StatusOr<WorkerServerAnswer> AskWorkerServer(
    const std::string& socket_path, const std::string& handler,
    absl::Time deadline, size_t max_body) {
  const std::string what =
      absl::StrCat("worker server ", socket_path, " /handler/", handler);
  if (socket_path.empty() || socket_path.size() > kMaxUnixSocketPath) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a usable socket path"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError(errno, what);
  absl::Cleanup close_fd = [fd] { close(fd); };
  absl::Status status = Connect(fd, socket_path, deadline, what);
  if (!status.ok()) return status;
  const std::string request =
      absl::StrCat("POST /handler/", handler,
                   " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
                   "Connection: close\r\n\r\n");
  status = SendAll(fd, request, deadline, what);
  if (!status.ok()) return status;
  std::string raw;
  bool full = false;
  status = ReadAnswer(fd, max_body, deadline, what, &raw, &full);
  if (!status.ok()) return status;
  return ParseAnswer(raw, max_body, full, what);
}

}  // namespace distjob
