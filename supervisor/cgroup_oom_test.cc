#include "supervisor/cgroup_oom.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(CgroupOomTest, ParsesBothFormats) {
  EXPECT_EQ(ParseOomKillCount("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n"), 2);
  EXPECT_EQ(ParseOomKillCount("oom_kill_disable 0\nunder_oom 0\noom_kill 7"),
            7);
  EXPECT_EQ(ParseOomKillCount("oom_kill_disable 0\n"), std::nullopt);
}

TEST(CgroupOomTest, FindsV1MemoryAndV2Files) {
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/cg";
  mkdir(root.c_str(), 0755);
  mkdir((root + "/memory").c_str(), 0755);
  mkdir((root + "/memory/job").c_str(), 0755);
  std::ofstream(root + "/memory/job/memory.oom_control") << "oom_kill 1\n";
  EXPECT_EQ(FindOomCounterFile("4:memory:/job\n0::/\n", root),
            root + "/memory/job/memory.oom_control");
  // A path from outside our cgroup namespace: the mount root is ours.
  std::ofstream(root + "/memory/memory.oom_control") << "oom_kill 0\n";
  EXPECT_EQ(FindOomCounterFile("4:memory:/elsewhere\n", root),
            root + "/memory/memory.oom_control");
  mkdir((root + "/pod").c_str(), 0755);
  std::ofstream(root + "/pod/memory.events") << "oom_kill 0\n";
  EXPECT_EQ(FindOomCounterFile("0::/pod\n", root), root + "/pod/memory.events");
  EXPECT_EQ(FindOomCounterFile("1:cpu:/\n", root), std::nullopt);
  EXPECT_EQ(OomCounter(std::nullopt).Read(), std::nullopt);
}

}  // namespace
}  // namespace distjob
