#include "agent/preflight.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/files.h"
#include "common/resolver.h"
#include "common/socket_address.h"
#include "grpcpp/grpcpp.h"
#include "proto/nvhcd.grpc.pb.h"

namespace distjob {
namespace {

// How often a wait looks at `cancelled`: a stop signal ends a check well
// within the second the issue allows.
constexpr absl::Duration kPollSlice = absl::Milliseconds(100);
// Read at most this much of a --check-path file (NVRx reads 4 KiB).
constexpr size_t kReadProbeBytes = 4096;

bool Stopped(const std::function<bool()>& cancelled) {
  return cancelled != nullptr && cancelled();
}

PreflightResult Result(std::string check, std::string target, PreflightClass c,
                       std::string detail) {
  PreflightResult r;
  r.check = std::move(check);
  r.target = std::move(target);
  r.result = c;
  r.detail = std::move(detail);
  return r;
}

enum class Ended { kDone, kTimedOut, kStopped };

// Runs `work` on its own thread and waits for it, at most `timeout`, polling
// `cancelled`: a stat() on a hung NFS mount blocks in the kernel where no
// timeout reaches, so the thread is left behind (detached; the state it
// writes is shared) and the check ends on time anyway.
Ended RunBounded(std::function<void()> work, absl::Duration timeout,
                 const std::function<bool()>& cancelled) {
  auto done = std::make_shared<absl::Notification>();
  std::thread([work = std::move(work), done] {
    work();
    done->Notify();
  }).detach();
  const absl::Time deadline = absl::Now() + timeout;
  while (!done->WaitForNotificationWithTimeout(kPollSlice)) {
    if (Stopped(cancelled)) return Ended::kStopped;
    if (absl::Now() >= deadline) return Ended::kTimedOut;
  }
  return Ended::kDone;
}

// "host:port" or "[v6]:port"; false when it is neither.
bool SplitHostPort(const std::string& endpoint, std::string* host, int* port) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string h = endpoint.substr(0, colon);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  if (!absl::SimpleAtoi(endpoint.substr(colon + 1), port) || *port < 1 ||
      *port > 65535) {
    return false;
  }
  *host = h;
  return true;
}

// A non-blocking connect to `address`:`port`, waited for in slices until
// `deadline`. OK when it connected; the errno's text otherwise.
absl::Status ConnectOnce(const std::string& address, int port,
                         absl::Time deadline,
                         const std::function<bool()>& cancelled) {
  const std::optional<SocketAddress> to = ParseSocketAddress(address, port);
  if (!to.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", address, "' is no address"));
  }
  const int fd =
      socket(to->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(std::strerror(errno));
  absl::Status status = absl::OkStatus();
  if (connect(fd, to->get(), to->length) != 0 && errno != EINPROGRESS) {
    status = absl::UnavailableError(std::strerror(errno));
  }
  while (status.ok()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kPollSlice))) >
        0) {
      int error = 0;
      socklen_t size = sizeof(error);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      if (error != 0) status = absl::UnavailableError(std::strerror(error));
      break;
    }
    if (Stopped(cancelled)) status = absl::CancelledError("stopped");
    if (absl::Now() >= deadline) {
      status = absl::DeadlineExceededError("no answer (timed out)");
    }
  }
  close(fd);
  return status;
}

// The kind of failure an errno from a path check is: what the user named
// does not exist or is not theirs (fatal: no retry fixes the manifest), or
// the storage misbehaves right now (EIO, ESTALE...: retryable).
PreflightClass PathErrorClass(int error) {
  switch (error) {
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case EPERM:
    case EROFS:
    case ELOOP:
    case ENAMETOOLONG:
      return PreflightClass::kFatal;
    default:
      return PreflightClass::kRetryable;
  }
}

// stat, then list a directory's first entry or read a file's first 4 KiB
// (NVRx's storage check); for `writable`, create and remove a file in the
// directory. Returns 0 and what was done, or the errno and the step.
int ProbePath(const std::string& path, bool writable, std::string* what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return *what = "stat", errno;
  if (writable) {
    if (!S_ISDIR(st.st_mode)) return *what = "not a directory", ENOTDIR;
    std::string name = path + "/.distjob-preflight-XXXXXX";
    const int fd = mkstemp(name.data());
    if (fd < 0) return *what = "create a file", errno;
    const bool wrote = write(fd, "x", 1) == 1;
    const int error = errno;
    close(fd);
    unlink(name.c_str());
    if (!wrote) return *what = "write", error;
    return *what = "created and removed a file", 0;
  }
  if (S_ISDIR(st.st_mode)) {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return *what = "list", errno;
    errno = 0;
    // One entry read or none: only errno (set on failure) is the answer.
    (void)readdir(dir);
    const int error = errno;
    closedir(dir);
    if (error != 0) return *what = "list", error;
    return *what = "listed", 0;
  }
  if (!S_ISREG(st.st_mode)) {  // a FIFO or device: never opened
    return *what = absl::StrCat("stat: ", FileKind(st.st_mode)), 0;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return *what = "open", errno;
  char buffer[kReadProbeBytes];
  const bool read_ok = read(fd, buffer, sizeof(buffer)) >= 0;
  const int error = errno;
  close(fd);
  if (!read_ok) return *what = "read", error;
  return *what = "read", 0;
}

}  // namespace

const char* PreflightClassName(PreflightClass c) {
  switch (c) {
    case PreflightClass::kPass:
      return "pass";
    case PreflightClass::kWarning:
      return "warning";
    case PreflightClass::kRetryable:
      return "retryable";
    case PreflightClass::kFatal:
      return "fatal";
  }
  return "fatal";
}

std::vector<PreflightResult> CheckNames(
    const PreflightOptions& options, const std::function<bool()>& cancelled) {
  std::vector<PreflightResult> results;
  if (options.names.empty()) return results;
  const absl::Time start = absl::Now();
  ResolverOptions resolver;
  resolver.servers = options.dns_servers;
  resolver.pass_timeout = options.timeout;
  resolver.query_timeout = std::min(options.timeout, absl::Seconds(2));
  resolver.cancelled = cancelled;
  auto answers = ResolveNames(options.names, resolver);
  const bool stopped = Stopped(cancelled);
  for (const std::string& name : options.names) {
    PreflightResult r = Result("dns", name, PreflightClass::kPass, "");
    if (!answers.ok()) {
      r.result = PreflightClass::kRetryable;
      r.detail = std::string(answers.status().message());
    } else if (auto it = answers->find(name);
               it != answers->end() && !it->second.empty()) {
      r.detail = it->second.front();
    } else {
      // Peer names appear only once the peer's pod is Ready: retry.
      r.result = PreflightClass::kRetryable;
      r.detail = stopped ? "stopped" : "does not resolve (yet)";
    }
    r.elapsed = absl::Now() - start;
    results.push_back(std::move(r));
  }
  return results;
}

PreflightResult CheckTcpReach(const std::string& endpoint,
                              const PreflightOptions& options,
                              const std::function<bool()>& cancelled) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.timeout;
  std::string host;
  int port = 0;
  PreflightResult r = Result("tcp", endpoint, PreflightClass::kPass, "");
  if (!SplitHostPort(endpoint, &host, &port)) {
    r.result = PreflightClass::kFatal;
    r.detail = "not HOST:PORT";
    return r;
  }
  ResolverOptions resolver;
  resolver.servers = options.dns_servers;
  resolver.pass_timeout = options.timeout;
  resolver.query_timeout = std::min(options.timeout, absl::Seconds(2));
  resolver.cancelled = cancelled;
  auto addresses = ResolveHost(host, resolver);
  absl::Status status = addresses.status();
  if (addresses.ok()) {
    for (const std::string& address : *addresses) {
      status = ConnectOnce(address, port, deadline, cancelled);
      if (status.ok()) {
        r.detail = absl::StrCat("connected to ", JoinHostPort(address, port));
        break;
      }
      if (absl::IsCancelled(status) || absl::Now() >= deadline) break;
    }
  }
  if (!status.ok()) {
    // Not listening yet, or not routable yet: both pass with time.
    r.result = PreflightClass::kRetryable;
    r.detail = std::string(status.message());
  }
  r.elapsed = absl::Now() - start;
  return r;
}

PreflightResult CheckFreePort(int port) {
  const std::string target = absl::StrCat(port);
  PreflightResult r = Result("port", target, PreflightClass::kPass, "free");
  // As the agent's listeners bind: dual stack where the pod has IPv6, with
  // SO_REUSEADDR, so a port in TIME_WAIT counts as free and a listener
  // does not.
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_any;
  v6.sin6_port = htons(static_cast<uint16_t>(port));
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_ANY);
  v4.sin_port = htons(static_cast<uint16_t>(port));
  const sockaddr* address = reinterpret_cast<const sockaddr*>(&v6);
  socklen_t length = sizeof(v6);
  if (fd < 0) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    address = reinterpret_cast<const sockaddr*>(&v4);
    length = sizeof(v4);
  }
  const int one = 1;
  if (fd < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, address, length) != 0) {
    // Another process of this pod's network namespace holds it; a new pod
    // gets a new namespace.
    r.result = PreflightClass::kRetryable;
    r.detail = absl::StrCat("cannot bind: ", std::strerror(errno));
  }
  if (fd >= 0) close(fd);
  return r;
}

PreflightResult CheckPath(const std::string& path, bool writable,
                          absl::Duration timeout,
                          const std::function<bool()>& cancelled) {
  const absl::Time start = absl::Now();
  PreflightResult r =
      Result(writable ? "writable" : "path", path, PreflightClass::kPass, "");
  struct Probe {
    int error = 0;
    std::string what;
  };
  auto probe = std::make_shared<Probe>();
  const Ended ended = RunBounded(
      [probe, path, writable] {
        probe->error = ProbePath(path, writable, &probe->what);
      },
      timeout, cancelled);
  if (ended == Ended::kStopped) {
    r.result = PreflightClass::kRetryable;
    r.detail = "stopped";
  } else if (ended == Ended::kTimedOut) {
    // A hung mount: the node's, not the job's.
    r.result = PreflightClass::kRetryable;
    r.detail = absl::StrCat("no answer within ", absl::FormatDuration(timeout),
                            " (a hung mount?)");
  } else if (probe->error != 0) {
    r.result = PathErrorClass(probe->error);
    r.detail = absl::StrCat(probe->what, ": ", std::strerror(probe->error));
  } else {
    r.detail = probe->what;
  }
  r.elapsed = absl::Now() - start;
  return r;
}

PreflightResult CheckDevices(const std::string& pattern, bool required) {
  PreflightResult r = Result("device", pattern, PreflightClass::kPass, "");
  glob_t matches{};
  const int rc = glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  const size_t count = rc == 0 ? matches.gl_pathc : 0;
  if (count > 0) {
    r.detail = absl::StrCat(count, " present (", matches.gl_pathv[0],
                            count > 1 ? ", ..." : "", ")");
  } else {
    // Not on this node: another node may have them.
    r.result = required ? PreflightClass::kRetryable : PreflightClass::kWarning;
    r.detail = "none present";
  }
  globfree(&matches);
  return r;
}

std::vector<PreflightResult> CheckInfiniband(const std::string& root,
                                             bool required) {
  std::vector<PreflightResult> results;
  const PreflightClass down =
      required ? PreflightClass::kRetryable : PreflightClass::kWarning;
  glob_t states{};
  const std::string pattern = root + "/*/ports/*/state";
  if (glob(pattern.c_str(), 0, nullptr, &states) != 0 || states.gl_pathc == 0) {
    globfree(&states);
    results.push_back(Result("infiniband", root,
                             required ? down : PreflightClass::kPass,
                             "no InfiniBand port"));
    return results;
  }
  for (size_t i = 0; i < states.gl_pathc; ++i) {
    std::string path = states.gl_pathv[i];
    // <root>/<device>/ports/<n>/state -> "<device>/<n>"
    std::string target = path.substr(root.size() + 1);
    target = target.substr(0, target.size() - std::strlen("/state"));
    const size_t ports = target.find("/ports/");
    if (ports != std::string::npos) target.erase(ports, 6);
    auto text = ReadSmallRegularFile(path, 256);
    // The kernel writes "4: ACTIVE"; anything else (DOWN, INIT, ARMED) is
    // a port the job's collectives cannot use yet.
    std::string state = text.ok()
                            ? std::string(absl::StripAsciiWhitespace(*text))
                            : std::string(text.status().message());
    const bool active = text.ok() && absl::EndsWith(state, "ACTIVE");
    results.push_back(Result("infiniband", target,
                             active ? PreflightClass::kPass : down, state));
  }
  globfree(&states);
  return results;
}

PreflightResult CheckHealthDaemon(const std::string& target,
                                  absl::Duration timeout,
                                  const std::function<bool()>& cancelled) {
  const absl::Time start = absl::Now();
  PreflightResult r =
      Result("health-daemon", target, PreflightClass::kPass, "");
  absl::string_view socket_path = target;
  if (!absl::ConsumePrefix(&socket_path, "unix://")) {
    absl::ConsumePrefix(&socket_path, "unix:");
  }
  struct stat st {};
  if (stat(std::string(socket_path).c_str(), &st) != 0) {
    // As NVRx: no daemon on this node means no verdict, not a bad node.
    r.result = PreflightClass::kWarning;
    r.detail = absl::StrCat("no daemon (", std::strerror(errno), "): skipped");
    return r;
  }
  auto channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = nvhcd::HealthCheckService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(start + timeout));
  nvhcd::HealthCheckRequest request;
  nvhcd::HealthCheckResponse response;
  grpc::Status status;
  absl::Notification done;
  stub->async()->RunHealthCheck(&context, &request, &response,
                                [&](grpc::Status s) {
                                  status = std::move(s);
                                  done.Notify();
                                });
  while (!done.WaitForNotificationWithTimeout(kPollSlice)) {
    if (Stopped(cancelled)) context.TryCancel();
  }
  r.elapsed = absl::Now() - start;
  if (!status.ok()) {
    // The daemon did not answer: no verdict on the node.
    r.result = PreflightClass::kWarning;
    r.detail = absl::StrCat("no answer: ", status.error_message());
    return r;
  }
  auto output = ParseJson(response.output(), "the daemon's output");
  const bool counted = output.ok() && output->is_object() &&
                       output->contains("fail_count") &&
                       (*output)["fail_count"].is_number_integer();
  if (!counted) {
    r.result = response.success() ? PreflightClass::kWarning
                                  : PreflightClass::kRetryable;
    r.detail = absl::StrCat("output without fail_count; success=",
                            response.success() ? "true" : "false");
    return r;
  }
  const int64_t fails = (*output)["fail_count"].get<int64_t>();
  if (fails != 0 || !response.success()) {
    // The node failed its own checks: exclude it, retry elsewhere.
    r.result = PreflightClass::kRetryable;
  }
  r.detail =
      absl::StrCat("fail_count ", fails, response.error().empty() ? "" : "; ",
                   response.error());
  return r;
}

std::vector<PreflightResult> RunPreflight(
    const PreflightOptions& options, const std::function<bool()>& cancelled) {
  std::vector<PreflightResult> results = CheckNames(options, cancelled);
  auto add = [&results, &cancelled](PreflightResult r) {
    if (!Stopped(cancelled)) results.push_back(std::move(r));
  };
  if (!options.rdzv_endpoint.empty() && !Stopped(cancelled)) {
    add(CheckTcpReach(options.rdzv_endpoint, options, cancelled));
  }
  for (int port : options.ports) add(CheckFreePort(port));
  for (const std::string& p : options.paths) {
    if (!Stopped(cancelled))
      add(CheckPath(p, false, options.timeout, cancelled));
  }
  for (const std::string& p : options.writable_paths) {
    if (!Stopped(cancelled))
      add(CheckPath(p, true, options.timeout, cancelled));
  }
  for (const std::string& d : options.devices) {
    add(CheckDevices(d, options.require_devices));
  }
  if (!Stopped(cancelled)) {
    for (PreflightResult& r :
         CheckInfiniband(options.ib_root, options.require_ib)) {
      add(std::move(r));
    }
  }
  if (!options.health_daemon.empty() && !Stopped(cancelled)) {
    add(CheckHealthDaemon(options.health_daemon, options.timeout, cancelled));
  }
  return results;
}

PreflightClass Overall(const std::vector<PreflightResult>& results) {
  PreflightClass worst = PreflightClass::kPass;
  for (const PreflightResult& r : results) {
    if (static_cast<int>(r.result) > static_cast<int>(worst)) worst = r.result;
  }
  return worst;
}

std::string SummaryLine(const PreflightResult& r) {
  std::string name = PreflightClassName(r.result);
  for (char& c : name) c = static_cast<char>(std::toupper(c));
  return absl::StrCat(name, "  ", r.check, "  ", r.target, ": ", r.detail, " (",
                      absl::ToInt64Milliseconds(r.elapsed), " ms)");
}

Json PreflightJson(const std::vector<PreflightResult>& results) {
  const PreflightClass overall = Overall(results);
  Json checks = Json::array();
  for (const PreflightResult& r : results) {
    checks.push_back({{"check", r.check},
                      {"target", ValidUtf8(r.target)},
                      {"result", PreflightClassName(r.result)},
                      {"detail", ValidUtf8(r.detail)},
                      {"elapsed_ms", absl::ToInt64Milliseconds(r.elapsed)}});
  }
  return Json{{"result", PreflightClassName(overall)},
              {"exit_code", static_cast<int>(overall)},
              {"checks", std::move(checks)}};
}

}  // namespace distjob
