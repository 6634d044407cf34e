#include "common/route_interface.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RouteInterfaceTest, LoopbackIsReachedThroughLo) {
  auto name = RouteInterface("127.0.0.1");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "lo");
  // Every 127/8 address is lo's, though only 127.0.0.1 is configured.
  name = RouteInterface("127.0.0.3");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "lo");
}

// What RouteInterface answers for `address` in a network namespace of its
// own (a pod's) holding `dj0` with 10.213.9.1/24, one end of a veth pair
// as the e2e pods have (some kernels have no dummy interfaces). Run in a
// child, which alone enters the namespace; "skip: why" where the namespace
// cannot be made (no root, no `ip`).
std::string RouteInAPod(const std::string& address) {
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    if (unshare(CLONE_NEWNET) != 0) {
      out = std::string("skip: unshare(CLONE_NEWNET): ") + std::strerror(errno);
    } else if (std::system(
                   "/sbin/ip link add dj0 type veth peer name dj1 && "
                   "/sbin/ip addr add 10.213.9.1/24 dev dj0 && "
                   "/sbin/ip link set dj1 up && /sbin/ip link set dj0 up") !=
               0) {
      out = "skip: /sbin/ip could not add a veth pair";
    } else {
      auto name = RouteInterface(address);
      out = name.ok() ? *name : name.status().ToString();
    }
    (void)!write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

// The e2e pods' case: the launcher's route to a worker goes out through
// the pod's own interface, whose name Hydra is given.
TEST(RouteInterfaceTest, ASubnetIsReachedThroughItsInterface) {
  const std::string name = RouteInAPod("10.213.9.7");
  if (name.rfind("skip: ", 0) == 0) GTEST_SKIP() << name;
  EXPECT_EQ(name, "dj0");
}

TEST(RouteInterfaceTest, NoRouteIsNotFoundNamingTheAddress) {
  // The namespace has no default route: 192.0.2.1 is unreachable.
  const std::string answer = RouteInAPod("192.0.2.1");
  if (answer.rfind("skip: ", 0) == 0) GTEST_SKIP() << answer;
  EXPECT_NE(answer.find("NOT_FOUND"), std::string::npos) << answer;
  EXPECT_NE(answer.find("192.0.2.1"), std::string::npos) << answer;
}

TEST(RouteInterfaceTest, ANameIsNoAddress) {
  auto name = RouteInterface("worker-0.job");
  EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(name.status().message().find("worker-0.job"), std::string::npos);
}

}  // namespace
}  // namespace distjob
