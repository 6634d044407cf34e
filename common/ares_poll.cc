#include "common/ares_poll.h"

#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/time/clock.h"

namespace distjob {

void PollAres(ares_channel channel, absl::Time deadline,
              const std::function<bool()>& done) {
  while ((done == nullptr || !done()) && absl::Now() < deadline) {
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
    std::vector<pollfd> fds;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      short events = 0;
      if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
      if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
      if (events != 0) fds.push_back({socks[i], events, 0});
    }
    if (fds.empty()) return;
    // c-ares' own next timeout, at most 100 ms and never past the deadline.
    timeval tv{};
    const timeval* next = ares_timeout(channel, nullptr, &tv);
    int64_t wait_ms =
        next != nullptr ? next->tv_sec * 1000 + next->tv_usec / 1000 : 100;
    wait_ms = std::min<int64_t>(wait_ms, 100);
    if (deadline != absl::InfiniteFuture()) {
      wait_ms =
          std::min(wait_ms, absl::ToInt64Milliseconds(deadline - absl::Now()));
    }
    if (poll(fds.data(), fds.size(),
             static_cast<int>(std::max<int64_t>(1, wait_ms))) <= 0) {
      ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
      continue;
    }
    for (const pollfd& p : fds) {
      ares_process_fd(
          channel,
          (p.revents & (POLLIN | POLLERR | POLLHUP)) ? p.fd : ARES_SOCKET_BAD,
          (p.revents & POLLOUT) ? p.fd : ARES_SOCKET_BAD);
    }
  }
}

}  // namespace distjob
