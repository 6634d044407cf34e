#include "common/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace distjob {
namespace {

constexpr int kUsers = 3;

// Per FdUser: the declared need in descriptors and in connections, and
// whether its line was logged (once per process). Atomics: the stores start on
// the agent's threads while the agent may declare; nothing else is shared.
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

// The one line FitConnections logs about a cap of `total` connections
// that the limit cuts to `fit`, for a job that needs `needed`; nothing
// when the cap is neither cut nor below the need.
void LogCap(absl::string_view what, size_t total, size_t fit, uint64_t limit,
            size_t fds_per_connection, size_t needed) {
  const size_t cap = std::min(total, fit);
  const size_t fds = std::max<size_t>(fds_per_connection, 1);
  if (total > fit && fit < needed) {
    // The limit is what keeps the job out (and maybe the cap as well).
    DJ_LOG_WARNING(
        "{}={} cut to {} by the open-file limit ({}), below the {} "
        "connection(s) this job's declared size needs; raise the pod's "
        "open-file limit (ulimit -n) by at least {}{}",
        what, total, fit, limit, needed, (std::min(needed, total) - fit) * fds,
        total < needed
            ? absl::StrCat("; ", what, "=", total, " is below it too")
            : "");
  } else if (cap < needed) {
    DJ_LOG_WARNING(
        "{}={} is below the {} connection(s) this job's declared size "
        "needs: connections past {} are refused",
        what, total, needed, total);
  } else if (total > fit) {
    DJ_LOG_INFO(
        "{}={} cut to {} by the open-file limit ({}; {} descriptor(s) a "
        "connection){}",
        what, total, fit, limit, fds,
        needed == 0
            ? ""
            : absl::StrCat(", which holds the ", needed, " this job needs"));
  }
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
    const bool said =
        *total > fit || std::min(*total, fit) < need.connections.load();
    if (said && !need.logged.exchange(true)) {
      LogCap(what, *total, fit, nofile.rlim_cur, fds_per_connection,
             need.connections);
    }
    *total = std::min(*total, fit);
  }
  *per_peer = std::min(*per_peer, *total);
}

}  // namespace distjob
