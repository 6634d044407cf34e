#include "agent/fd_reserve.h"

#include <fcntl.h>
#include <unistd.h>

namespace distjob {
namespace {

int held[kReservedFds];
int held_count = 0;

}  // namespace

int HoldReservedFds() {
  if (held_count > 0) return held_count;
  while (held_count < kReservedFds) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    held[held_count++] = fd;
  }
  return held_count;
}

void ReleaseReservedFds() {
  while (held_count > 0) close(held[--held_count]);
}

}  // namespace distjob
