#include "common/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "common/logging.h"

namespace distjob {
namespace {

constexpr int kUsers = 3;

// Per FdUser: the declared need in descriptors and in connections, and
// whether its cut was logged. Atomics: the stores start on the agent's
// threads while the agent may declare; nothing else is shared.
struct Need {
  std::atomic<size_t> fds{0};
  std::atomic<size_t> connections{0};
  std::atomic<bool> logged{false};
};
Need needs[kUsers];

Need& NeedOf(FdUser user) { return needs[static_cast<int>(user)]; }

// The descriptors every server but `user` declared.
size_t OthersFds(FdUser user) {
  size_t sum = 0;
  for (int i = 0; i < kUsers; ++i) {
    if (i != static_cast<int>(user)) sum += needs[i].fds.load();
  }
  return sum;
}

}  // namespace

OpenFileLimit RaiseOpenFileLimit() {
  OpenFileLimit out;
  rlimit nofile = {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return out;
  out.soft_before = nofile.rlim_cur;
  if (nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    // Refused (a hard limit above the kernel's nr_open): the soft limit
    // stays where it was, and is answered as such.
    (void)setrlimit(RLIMIT_NOFILE, &nofile);
    getrlimit(RLIMIT_NOFILE, &nofile);
  }
  out.soft = nofile.rlim_cur;
  out.hard = nofile.rlim_max;
  return out;
}

size_t ConnectionsThatFit(uint64_t limit, size_t fds_per_connection,
                          size_t others_fds) {
  if (limit == RLIM_INFINITY) return SIZE_MAX;
  const uint64_t kept = uint64_t{kOtherFds} + others_fds;
  if (limit <= kept) return kMinConnections;
  const uint64_t fit = (limit - kept) / std::max<size_t>(fds_per_connection, 1);
  return static_cast<size_t>(
      std::clamp<uint64_t>(fit, kMinConnections, SIZE_MAX));
}

void DeclareConnectionNeed(FdUser user, size_t connections,
                           size_t fds_per_connection) {
  Need& need = NeedOf(user);
  need.connections = connections;
  need.fds = connections * std::max<size_t>(fds_per_connection, 1);
}

size_t DeclaredConnections(FdUser user) { return NeedOf(user).connections; }

void FitConnections(FdUser user, size_t fds_per_connection,
                    absl::string_view what, size_t* total, size_t* per_peer) {
  rlimit nofile = {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    const size_t fit = ConnectionsThatFit(nofile.rlim_cur, fds_per_connection,
                                          OthersFds(user));
    Need& need = NeedOf(user);
    if (*total > fit && !need.logged.exchange(true)) {
      const size_t needed = need.connections;
      if (fit < needed) {
        DJ_LOG_WARNING(
            "{}={} cut to {} by the open-file limit ({}), below the {} "
            "connection(s) this job's declared size needs; raise the pod's "
            "open-file limit (ulimit -n) by at least {}",
            what, *total, fit, nofile.rlim_cur, needed,
            (needed - fit) * std::max<size_t>(fds_per_connection, 1));
      } else {
        DJ_LOG_INFO(
            "{}={} cut to {} by the open-file limit ({}; {} descriptor(s) "
            "a connection), which holds the {} this job needs",
            what, *total, fit, nofile.rlim_cur, fds_per_connection, needed);
      }
    }
    *total = std::min(*total, fit);
  }
  *per_peer = std::min(*per_peer, *total);
}

}  // namespace distjob
