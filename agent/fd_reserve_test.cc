#include "agent/fd_reserve.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// With every other descriptor taken, the released reserve is what the
// agent's last writes open.
TEST(FdReserveTest, ReleasedDescriptorsCanBeOpenedWhenTheTableIsFull) {
  ASSERT_EQ(HoldReservedFds(), kReservedFds);
  EXPECT_EQ(HoldReservedFds(), kReservedFds);  // held once
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
    filler.push_back(fd);
  }
  EXPECT_LT(open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
  ReleaseReservedFds();
  std::vector<int> reopened;
  for (int i = 0; i < kReservedFds; ++i) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << "descriptor " << i << " of the reserve";
    if (fd >= 0) reopened.push_back(fd);
  }
  for (int fd : reopened) close(fd);
  for (int fd : filler) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

}  // namespace
}  // namespace distjob
