#include "rendezvous/store/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>

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

}  // namespace distjob
