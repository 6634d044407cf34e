#include "spawn/spawned_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// Everything the command writes to `fd` until it closes it.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

CommandExit WaitExit(SpawnedCommand* c) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (auto e = c->Poll()) return *e;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ADD_FAILURE() << "the command did not exit";
  return {};
}

// The process state letter of `pid` ('Z' for a zombie), or 0 when it is
// gone (reaped).
char State(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return 0;
  char state = 0;
  if (std::fscanf(f, "%*d (%*[^)]) %c", &state) != 1) state = 0;
  std::fclose(f);
  return state;
}

// Running, not a zombie: an orphan's reaper is init, not this test.
bool Alive(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char state = 0;
  const int n = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return n == 1 && state != 'Z';
}

// The first line the command writes to `fd` (non-blocking), without it.
std::string ReadLine(int fd) {
  std::string line;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char ch;
    const ssize_t n = read(fd, &ch, 1);
    if (n == 0 || (n == 1 && ch == '\n')) break;
    if (n == 1) line += ch;
  }
  return line;
}

TEST(SpawnedCommandTest, RunsThroughTheShellWithPipesAndExitStatus) {
  auto c =
      SpawnedCommand::Start("read x; echo \"got $x\"; echo err >&2; exit 7",
                            {{"PATH", "/usr/bin:/bin"}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(write((*c)->stdin_fd(), "abc\n", 4), 4);
  (*c)->CloseStdin();
  EXPECT_EQ(ReadAll((*c)->stdout_fd()), "got abc\n");
  EXPECT_EQ(ReadAll((*c)->stderr_fd()), "err\n");
  const CommandExit e = WaitExit(c->get());
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.code, 7);
}

TEST(SpawnedCommandTest, ASignalReachesTheWholeGroup) {
  auto c = SpawnedCommand::Start("sleep 60 & echo $!; wait", {});
  ASSERT_TRUE(c.ok()) << c.status();
  const pid_t grandchild = std::stoi(ReadLine((*c)->stdout_fd()));
  ASSERT_TRUE(Alive(grandchild));
  ASSERT_TRUE((*c)->Signal(SIGTERM).ok());
  const CommandExit e = WaitExit(c->get());
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.code, SIGTERM);
  const absl::Time gone_by = absl::Now() + absl::Seconds(5);
  while (Alive(grandchild) && absl::Now() < gone_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(Alive(grandchild));
  EXPECT_FALSE((*c)->Signal(0).ok());  // not a signal number
}

TEST(SpawnedCommandTest, EndGroupKillsWhatIgnoresSigterm) {
  // The grandchild ignores SIGTERM and outlives the shell's own end.
  auto c = SpawnedCommand::Start(
      "trap '' TERM; sh -c 'trap \"\" TERM; sleep 60' & echo $!; wait", {});
  ASSERT_TRUE(c.ok()) << c.status();
  const pid_t grandchild = std::stoi(ReadLine((*c)->stdout_fd()));
  ASSERT_TRUE(Alive(grandchild));
  const absl::Time start = absl::Now();
  const CommandExit e = (*c)->EndGroup(absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.code, SIGKILL);
  // Killed; reparented to init (or a subreaper), so reaped by it soon.
  const absl::Time gone_by = absl::Now() + absl::Seconds(5);
  while (Alive(grandchild) && absl::Now() < gone_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(Alive(grandchild));
}

// As the agent is for a worker pod's commands (PID 1, or a subreaper):
// what a command left running is re-parented here, and once it ends it is
// reaped, while a shell's own status is left for its SpawnedCommand.
TEST(SpawnedCommandTest, OrphansAreReapedAndShellsAreNot) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto left = SpawnedCommand::Start("sleep 0.2 & echo $!", {});
  ASSERT_TRUE(left.ok()) << left.status();
  const pid_t orphan = std::stoi(ReadLine((*left)->stdout_fd()));
  EXPECT_EQ(WaitExit(left->get()).code, 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int reaped = 0;
  while (State(orphan) != 0 && absl::Now() < deadline) {
    reaped += SpawnedCommand::ReapOrphans();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(State(orphan), 0) << "the orphan was not reaped";
  EXPECT_EQ(reaped, 1);
  // A shell that ended and is not yet polled stays for its owner.
  auto shell = SpawnedCommand::Start("exit 7", {});
  ASSERT_TRUE(shell.ok()) << shell.status();
  while (State((*shell)->pid()) != 'Z' && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(State((*shell)->pid()), 'Z');
  EXPECT_EQ(SpawnedCommand::ReapOrphans(), 0);
  const CommandExit e = WaitExit(shell->get());
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.code, 7);
}

}  // namespace
}  // namespace distjob
