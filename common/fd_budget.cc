#include "common/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>

#include "common/logging.h"

namespace distjob {

size_t ConnectionsThatFit(size_t fds_per_connection) {
  rlimit nofile = {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return SIZE_MAX;
  if (nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
    getrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (nofile.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  const size_t limit = static_cast<size_t>(nofile.rlim_cur);
  if (limit <= kOtherFds) return 16;
  const size_t share = (limit - kOtherFds) / 2;
  return std::max<size_t>(share / std::max<size_t>(fds_per_connection, 1), 16);
}

void FitConnections(size_t fds_per_connection, absl::string_view what,
                    size_t* total, size_t* per_peer) {
  const size_t fit = ConnectionsThatFit(fds_per_connection);
  if (*total > fit) {
    DJ_LOG_WARNING(
        "{}={} cut to {} by the open-file limit (half of it, {} "
        "descriptor(s) a connection)",
        what, *total, fit, fds_per_connection);
    *total = fit;
  }
  *per_peer = std::min(*per_peer, *total);
}

}  // namespace distjob
