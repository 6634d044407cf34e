#include "agent/outer_agent.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/cli/options.h"
#include "common/logging.h"

namespace distjob {
namespace {

constexpr char kRequest[] = "step-aside v1\n";
constexpr size_t kMaxRequest = 256;
constexpr size_t kMaxReply = 64 * 1024;
constexpr absl::Duration kReadDeadline = absl::Seconds(2);

// A value on one line: newlines would forge further lines.
std::string OneLineValue(const std::string& v) {
  std::string out = v;
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

int MillisLeft(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
}

// Reads until `end` is seen, EOF, `max` bytes or `deadline`.
// Waits until `fd` has `events` or `deadline`; false at the deadline, or
// as soon as `stop_fd` (if >= 0) is readable.
bool PollUntil(int fd, short events, absl::Time deadline, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int ms = MillisLeft(deadline);
    if (ms == 0) return false;
    const int n = poll(p, stop_fd >= 0 ? 2 : 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || p[1].revents != 0) return false;
    return true;
  }
}

std::string ReadBounded(int fd, size_t max, absl::Time deadline,
                        absl::string_view end, int stop_fd = -1) {
  std::string data;
  char buf[1024];
  while (data.size() < max && !absl::StrContains(data, end)) {
    if (!PollUntil(fd, POLLIN, deadline, stop_fd)) break;
    const ssize_t n = read(fd, buf, std::min(sizeof(buf), max - data.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

bool WriteAll(int fd, const std::string& data, absl::Time deadline,
              int stop_fd = -1) {
  size_t done = 0;
  while (done < data.size()) {
    if (!PollUntil(fd, POLLOUT, deadline, stop_fd)) return false;
    const ssize_t n =
        send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // The command name may hold spaces and parentheses: the fields after
  // the last ')' are "state ppid ...".
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  long ppid = 0;
  if (!(rest >> state >> ppid)) return 0;
  return static_cast<pid_t>(ppid);
}

}  // namespace

std::string EncodeHandoverReply(const HandoverReply& reply) {
  std::string out =
      reply.agreed ? "ok\n"
                   : absl::StrCat("refuse ", OneLineValue(reply.refusal), "\n");
  for (const auto& [name, value] : reply.settings) {
    absl::StrAppend(&out, "set ", OneLineValue(name), "=", OneLineValue(value),
                    "\n");
  }
  for (const std::string& l : reply.lost) {
    absl::StrAppend(&out, "lost ", OneLineValue(l), "\n");
  }
  if (!reply.rdzv_key_suffix.empty()) {
    absl::StrAppend(&out, "rdzv-key-suffix ",
                    OneLineValue(reply.rdzv_key_suffix), "\n");
  }
  return out + "end\n";
}

absl::StatusOr<HandoverReply> ParseHandoverReply(const std::string& text) {
  HandoverReply reply;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || !absl::StrContains(text, "end\n")) {
    return absl::DataLossError("the outer agent's answer was cut short");
  }
  const std::string& first = lines[0];
  if (first == "ok") {
    reply.agreed = true;
  } else if (absl::StartsWith(first, "refuse ")) {
    reply.refusal = first.substr(7);
  } else {
    return absl::DataLossError(absl::StrCat(
        "unexpected answer from the outer agent: '", first.substr(0, 80), "'"));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l == "end") break;
    if (absl::StartsWith(l, "set ")) {
      const size_t eq = l.find('=');
      if (eq == std::string::npos) continue;
      reply.settings[l.substr(4, eq - 4)] = l.substr(eq + 1);
    } else if (absl::StartsWith(l, "lost ")) {
      reply.lost.push_back(l.substr(5));
    } else if (absl::StartsWith(l, "rdzv-key-suffix ")) {
      reply.rdzv_key_suffix = l.substr(16);
    }
  }
  return reply;
}

void AddInheritedSettings(const RunOptions& outer, HandoverReply* reply) {
  auto set = [reply](const char* name, const std::string& value) {
    if (!value.empty()) reply->settings[name] = value;
  };
  if (outer.outcome.health_port != 0) {
    set("DISTJOB_HEALTH_PORT", std::to_string(outer.outcome.health_port));
  }
  if (outer.outcome.health_tls) set("DISTJOB_HEALTH_TLS", "1");
  if (outer.observability.metrics_port != 0) {
    set("DISTJOB_METRICS_PORT",
        std::to_string(outer.observability.metrics_port));
  }
  set("DISTJOB_METRICS_TLS_CERT", outer.observability.metrics_tls_cert);
  set("DISTJOB_METRICS_TLS_KEY", outer.observability.metrics_tls_key);
  set("DISTJOB_TERMINATION_LOG", outer.outcome.termination_log);
  set("DISTJOB_ERROR_FILE", outer.outcome.error_file);
  const StoreSecurityOptions& files = outer.security_files;
  set("DISTJOB_RDZV_TOKEN_FILE", files.token_file);
  set("DISTJOB_RDZV_TLS_CERT", files.tls_cert);
  set("DISTJOB_RDZV_TLS_KEY", files.tls_key);
  set("DISTJOB_RDZV_TLS_CA", files.tls_ca);
  set("DISTJOB_RDZV_TLS_SERVER_NAME", files.tls_server_name);
  if (files.token_file.empty() && !files.token_env.empty()) {
    // A secret never reaches a worker's environment, nor this socket.
    reply->lost.push_back(
        "the rendezvous token from DISTJOB_RDZV_TOKEN (a secret is never "
        "passed to a worker; use --rdzv-token-file or "
        "DISTJOB_RDZV_TOKEN_FILE)");
  }
}

bool IsDescendantOf(pid_t pid, pid_t ancestor) {
  for (int step = 0; step < 256 && pid > 1; ++step) {
    pid = ParentOf(pid);
    if (pid == ancestor) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<HandoverServer>> HandoverServer::Start(
    Handler handler) {
  std::unique_ptr<HandoverServer> server(new HandoverServer());
  server->handler_ = std::move(handler);
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp",
                                   "/distjob-outer-XXXXXX");
  // A private directory (0700): nobody else can reach the socket's name.
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat(
        "cannot make a directory for the handover socket under ",
        templ.substr(0, templ.rfind('/')), ": ", std::strerror(errno)));
  }
  server->dir_ = templ;
  server->path_ = templ + "/agent.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (server->path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("handover socket path too long: ", server->path_));
  }
  std::memcpy(addr.sun_path, server->path_.c_str(), server->path_.size() + 1);
  server->listen_fd_ =
      socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (server->listen_fd_ < 0 ||
      bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr),
           sizeof(addr)) != 0 ||
      listen(server->listen_fd_, 4) != 0) {
    return absl::InternalError(absl::StrCat("cannot listen on ", server->path_,
                                            ": ", std::strerror(errno)));
  }
  server->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (server->stop_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

HandoverServer::~HandoverServer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) < 0) {
      // An eventfd written once cannot be full.
    }
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  if (!path_.empty()) unlink(path_.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
}

void HandoverServer::Loop() {
  for (;;) {
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    Answer(conn);  // one at a time: the next waits in the backlog
    close(conn);
  }
}

void HandoverServer::Answer(int conn) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
  if (!IsDescendantOf(cred.pid, getpid())) {
    DJ_LOG_WARNING(
        "handover request from pid {}, not one of this agent's "
        "descendants: ignored",
        cred.pid);
    return;
  }
  const absl::Time deadline = absl::Now() + kReadDeadline;
  const std::string request = ReadBounded(conn, kMaxRequest, deadline, "\n");
  if (request != kRequest) {
    DJ_LOG_WARNING("malformed handover request from pid {}: ignored", cred.pid);
    return;
  }
  const HandoverReply reply = handler_(cred.pid);
  // An inner agent that cannot read the answer times out its request and
  // goes on without the handover: nothing more to do here.
  (void)WriteAll(conn, EncodeHandoverReply(reply), absl::Now() + kReadDeadline);
}

absl::StatusOr<HandoverReply> AskOuterToStepAside(const std::string& path,
                                                  absl::Duration timeout,
                                                  int stop_fd) {
  const absl::Time deadline = absl::Now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::UnavailableError(
        absl::StrCat("'", path.substr(0, 120), "' is not a socket path"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", path, ": ", std::strerror(err)));
  }
  std::string reply;
  if (WriteAll(fd, kRequest, deadline, stop_fd)) {
    reply = ReadBounded(fd, kMaxReply, deadline, "end\n", stop_fd);
  }
  close(fd);
  pollfd stop{stop_fd, POLLIN, 0};
  if (stop_fd >= 0 && poll(&stop, 1, 0) > 0) {
    return absl::CancelledError(
        absl::StrCat("stopped while waiting for the answer on ", path));
  }
  if (reply.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "no answer on ", path, " within ", absl::FormatDuration(timeout)));
  }
  return ParseHandoverReply(reply);
}

}  // namespace distjob
