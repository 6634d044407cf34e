#include "rendezvous/master_watch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/resolver.h"
#include "common/socket_address.h"

namespace distjob {
namespace {

// One non-blocking connect to `addr` (an IP literal), waited for up to
// `timeout`; 0, or the errno that ended it (ETIMEDOUT for no answer).
int ConnectOnce(const std::string& addr, int port, absl::Duration timeout) {
  const std::optional<SocketAddress> to = ParseSocketAddress(addr, port);
  if (!to.has_value()) return EINVAL;
  const int fd =
      socket(to->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int err = 0;
  if (connect(fd, to->get(), to->length) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p = {fd, POLLOUT, 0};
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
      if (poll(&p, 1, std::max(ms, 1)) <= 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t size = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &size) != 0) {
          err = errno;
        }
      }
    }
  }
  close(fd);
  return err;
}

}  // namespace

absl::Status ProbeTcp(const std::string& host, int port,
                      absl::Duration timeout) {
  ResolverOptions options;
  options.pass_timeout = timeout;
  auto addrs = ResolveHost(host, options);
  if (!addrs.ok()) return absl::UnavailableError(addrs.status().message());
  std::string why;
  for (const std::string& addr : *addrs) {
    const int err = ConnectOnce(addr, port, timeout);
    if (err == 0) return absl::OkStatus();
    const std::string where = JoinHostPort(addr, port);
    const std::string one =
        err == ECONNREFUSED ? absl::StrCat("connection refused by ", where)
        : err == ETIMEDOUT  ? absl::StrCat("no answer from ", where, " within ",
                                           absl::FormatDuration(timeout))
                            : absl::StrCat("cannot connect to ", where, ": ",
                                           std::strerror(err));
    absl::StrAppend(&why, why.empty() ? "" : "; ", one);
  }
  return absl::UnavailableError(why);
}

MasterWatch::MasterWatch(std::string host, int port, absl::Duration interval)
    : host_(std::move(host)), port_(port), interval_(interval) {
  thread_ = std::thread([this] { Loop(); });
}

MasterWatch::~MasterWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void MasterWatch::Loop() {
  ProgressLog progress(interval_);
  bool said = false;
  for (;;) {
    // Short: the destructor (the agent's shutdown) waits for it.
    const absl::Status probe = ProbeTcp(host_, port_, absl::Milliseconds(500));
    if (probe.ok()) {
      if (said) {
        DJ_LOG_INFO("the master {} (node rank 0's store) accepts connections",
                    JoinHostPort(host_, port_));
      }
      return;
    }
    if (progress.Due()) {
      said = true;
      DJ_LOG_INFO(
          "still waiting for the master {} (node rank 0's store; --master-addr,"
          " --master-port): {}; this node's workers wait for it ({} so far)",
          JoinHostPort(host_, port_), probe.message(),
          absl::FormatDuration(
              absl::Trunc(progress.Elapsed(), absl::Seconds(1))));
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_),
                             std::min(interval_, absl::Seconds(1)))) {
      return;
    }
  }
}

}  // namespace distjob
