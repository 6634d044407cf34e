#include "supervisor/device_fence.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

constexpr char kMarker[] = "DISTJOB_AGENT_INSTANCE=1-42";

// A fake /proc: one directory per pid, fd/N symlinks to the files it
// holds, an environ of NUL-separated entries.
class FakeProc {
 public:
  explicit FakeProc(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
    mkdir(root_.c_str(), 0755);
  }
  const std::string& root() const { return root_; }

  void Add(int pid, const std::vector<std::string>& fds,
           const std::string& environ) {
    const std::string dir = root_ + "/" + std::to_string(pid);
    mkdir(dir.c_str(), 0755);
    mkdir((dir + "/fd").c_str(), 0755);
    for (size_t i = 0; i < fds.size(); ++i) {
      EXPECT_EQ(
          symlink(fds[i].c_str(), (dir + "/fd/" + std::to_string(i)).c_str()),
          0);
    }
    std::ofstream(dir + "/environ") << environ;
  }

  // The process exited: its fds closed.
  void Close(int pid) {
    const std::string fd_dir = root_ + "/" + std::to_string(pid) + "/fd";
    for (int i = 0; i < 8; ++i)
      unlink((fd_dir + "/" + std::to_string(i)).c_str());
  }

 private:
  std::string root_;
};

DeviceFenceOptions Options(const FakeProc& proc) {
  DeviceFenceOptions options;
  options.proc_root = proc.root();
  options.marker = kMarker;
  return options;
}

std::string Env(const std::string& entry) {
  return std::string("PATH=/bin") + '\0' + entry + '\0' + "HOME=/";
}

TEST(DeviceFenceTest, FindsOnlyThisAgentsHoldersOfDeviceFiles) {
  FakeProc proc("proc_find");
  proc.Add(100, {"/dev/null", "/dev/nvidia0", "/dev/nvidiactl"}, Env(kMarker));
  proc.Add(101, {"/dev/dri/renderD128", "pipe:[123]"}, Env(kMarker));
  proc.Add(102, {"/dev/kfd", "/dev/accel0"}, Env(kMarker));
  // Another agent's (or an unrelated) process on the same devices.
  proc.Add(103, {"/dev/nvidia0"}, Env("DISTJOB_AGENT_INSTANCE=1-43"));
  proc.Add(104, {"/dev/nvidia1"}, "");
  // This agent's, holding no device; and the agent itself.
  proc.Add(105, {"/tmp/log", "socket:[9]"}, Env(kMarker));
  proc.Add(1, {"/dev/nvidia0"}, Env(kMarker));
  std::vector<DeviceHolder> holders = FindDeviceHolders(Options(proc), 1);
  std::vector<std::pair<int, std::string>> got;
  for (const DeviceHolder& h : holders) got.emplace_back(h.pid, h.path);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<int, std::string>>{
                     {100, "/dev/nvidia0"},
                     {100, "/dev/nvidiactl"},
                     {101, "/dev/dri/renderD128"},
                     {102, "/dev/accel0"},
                     {102, "/dev/kfd"}}));
}

TEST(DeviceFenceTest, DevicePatternsAreConfigurable) {
  FakeProc proc("proc_patterns");
  proc.Add(200, {"/tmp/fake-gpu0"}, Env(kMarker));
  DeviceFenceOptions options = Options(proc);
  EXPECT_TRUE(FindDeviceHolders(options, 1).empty());
  options.device_patterns = {"/tmp/fake-gpu*"};
  ASSERT_EQ(FindDeviceHolders(options, 1).size(), 1u);
  EXPECT_EQ(FindDeviceHolders(options, 1)[0].pid, 200);
}

TEST(DeviceFenceTest, KillsHoldersAndWaitsForTheirRelease) {
  FakeProc proc("proc_wait");
  proc.Add(300, {"/dev/nvidia0", "/dev/nvidiactl"}, Env(kMarker));
  std::vector<pid_t> killed;
  int pauses = 0;
  std::vector<DeviceHolder> left = WaitForDeviceRelease(
      Options(proc), 1, absl::Seconds(30),
      [&](absl::Duration) {
        if (++pauses == 3) proc.Close(300);
        return true;
      },
      [&](pid_t pid) { killed.push_back(pid); });
  EXPECT_TRUE(left.empty());
  EXPECT_EQ(killed, std::vector<pid_t>{300});  // once, whatever it holds
  EXPECT_EQ(pauses, 3);
}

TEST(DeviceFenceTest, ReturnsTheHoldersLeftAtTheDeadline) {
  FakeProc proc("proc_timeout");
  proc.Add(400, {"/dev/nvidia3"}, Env(kMarker));
  const absl::Time start = absl::Now();
  std::vector<DeviceHolder> left = WaitForDeviceRelease(
      Options(proc), 1, absl::Milliseconds(100),
      [](absl::Duration d) {
        absl::SleepFor(d);
        return true;
      },
      [](pid_t) {});
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].pid, 400);
  EXPECT_EQ(left[0].path, "/dev/nvidia3");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
}

TEST(DeviceFenceTest, NoHolderMeansNoWait) {
  FakeProc proc("proc_none");
  int pauses = 0;
  EXPECT_TRUE(WaitForDeviceRelease(
                  Options(proc), 1, absl::Seconds(30),
                  [&](absl::Duration) { return ++pauses > 0; },
                  [](pid_t) { ADD_FAILURE() << "nothing to kill"; })
                  .empty());
  EXPECT_EQ(pauses, 0);
}

TEST(DeviceFenceTest, MarkerNamesThePidAndStartTime) {
  EXPECT_EQ(DeviceFenceMarker(7, absl::FromUnixNanos(12345)),
            "DISTJOB_AGENT_INSTANCE=7-12345");
}

}  // namespace
}  // namespace distjob
