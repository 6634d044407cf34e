#include "supervisor/thread_states.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

// A fake /proc with one process and the given threads.
class FakeProc {
 public:
  FakeProc() {
    char dir[] = "/tmp/thread_states_testXXXXXX";
    root_ = mkdtemp(dir);
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }

  void AddThread(int pid, int tid, const std::string& stat,
                 const std::string& wchan) {
    const std::string task = root_ + "/" + std::to_string(pid) + "/task";
    mkdir((root_ + "/" + std::to_string(pid)).c_str(), 0755);
    mkdir(task.c_str(), 0755);
    const std::string dir = task + "/" + std::to_string(tid);
    mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/stat") << stat;
    std::ofstream(dir + "/wchan") << wchan;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(ThreadStatesTest, ReadsEveryThreadsStateAndWaitChannel) {
  FakeProc proc;
  proc.AddThread(42, 42, "42 (python3) S 1 42 42 0 -1", "futex_wait_queue");
  // A name with spaces and a parenthesis: it ends at the last ')'.
  proc.AddThread(42, 43, "43 (pt (main) 1) D 1 42 42 0 -1", "fuse_wait");
  const ProcessStates states = ReadThreadStates(proc.root(), 42);
  ASSERT_EQ(states.threads.size(), 2u);
  EXPECT_EQ(states.threads[0].comm, "python3");
  EXPECT_EQ(states.threads[0].state, 'S');
  EXPECT_EQ(states.threads[0].wchan, "futex_wait_queue");
  EXPECT_EQ(states.threads[1].comm, "pt (main) 1");
  EXPECT_EQ(states.threads[1].state, 'D');
  EXPECT_TRUE(Unkillable(states));
}

TEST(ThreadStatesTest, ARunningThreadWaitsInNothing) {
  FakeProc proc;
  proc.AddThread(7, 7, "7 (w) R 1 7 7", "0");
  const ProcessStates states = ReadThreadStates(proc.root(), 7);
  ASSERT_EQ(states.threads.size(), 1u);
  EXPECT_EQ(states.threads[0].wchan, "");
  EXPECT_FALSE(Unkillable(states));
}

TEST(ThreadStatesTest, AGoneProcessHasNoThreads) {
  FakeProc proc;
  EXPECT_TRUE(ReadThreadStates(proc.root(), 99).threads.empty());
}

TEST(ThreadStatesTest, ThreadsPastTheBoundAreCountedNotRead) {
  FakeProc proc;
  for (int tid = 1000; tid < 1000 + kMaxThreadsRead + 3; ++tid) {
    proc.AddThread(5, tid, std::to_string(tid) + " (t) S 1", "");
  }
  const ProcessStates states = ReadThreadStates(proc.root(), 5);
  EXPECT_EQ(states.threads.size(), static_cast<size_t>(kMaxThreadsRead));
  EXPECT_EQ(states.threads_not_read, 3);
}

TEST(ThreadStatesTest, ThisProcessIsReadFromTheRealProc) {
  const ProcessStates states = ReadThreadStates("/proc", getpid());
  ASSERT_FALSE(states.threads.empty());
  EXPECT_EQ(states.threads[0].tid, getpid());
  EXPECT_EQ(states.threads[0].state, 'R');  // it is reading its own stat
}

TEST(ThreadStatesTest, StatesAreNamedForPeople) {
  EXPECT_EQ(DescribeState('D'), "uninterruptible sleep (D)");
  EXPECT_EQ(DescribeState('T'), "stopped (T)");
}

}  // namespace
}  // namespace distjob
