#include "supervisor/progress_tracker.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// Sets the file's mtime, so that a rewrite within the filesystem's
// timestamp granularity is told apart by content alone.
void SetMtime(const std::string& path, absl::Time t) {
  struct timespec times[2] = {absl::ToTimespec(t), absl::ToTimespec(t)};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

TEST(ProgressFileTest, AppearedChangedOrTouchedIsProgress) {
  const std::string path = TempPath("progress_a");
  std::remove(path.c_str());
  const ProgressFileState missing = ReadProgressFile(path);
  EXPECT_FALSE(missing.exists);
  Write(path, "step 10\n");
  const absl::Time t = absl::FromUnixSeconds(1700000000);
  SetMtime(path, t);
  const ProgressFileState first = ReadProgressFile(path);
  EXPECT_TRUE(first.exists);
  EXPECT_EQ(first.content, "step 10\n");
  EXPECT_TRUE(ProgressFileChanged(missing, first));
  EXPECT_FALSE(ProgressFileChanged(first, ReadProgressFile(path)));
  Write(path, "step 20\n");
  SetMtime(path, t);  // same mtime, other content
  EXPECT_TRUE(ProgressFileChanged(first, ReadProgressFile(path)));
  Write(path, "step 10\n");
  SetMtime(path, t + absl::Seconds(1));  // same content, touched
  EXPECT_TRUE(ProgressFileChanged(first, ReadProgressFile(path)));
  std::remove(path.c_str());
  EXPECT_FALSE(ProgressFileChanged(first, ReadProgressFile(path)));
}

TEST(ProgressFileTest, ADirectoryIsNoProgressFile) {
  EXPECT_FALSE(ReadProgressFile(TempPath("")).exists);
  EXPECT_FALSE(ReadProgressFile("").exists);
}

TEST(ProgressTrackerTest, CountsConsecutiveAttemptsWithoutProgress) {
  const std::string path = TempPath("progress_b");
  std::remove(path.c_str());
  ProgressTracker tracker(path, 3);
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  for (int n = 1; n <= 2; ++n) {
    tracker.AttemptStarted(t0 + absl::Seconds(n));
    EXPECT_FALSE(tracker.AttemptFailed(absl::InfinitePast()));
    EXPECT_EQ(tracker.without_progress(), n);
    EXPECT_FALSE(tracker.Exhausted());
  }
  // The progress file written during the third attempt resets the count.
  tracker.AttemptStarted(t0 + absl::Seconds(3));
  Write(path, "1\n");
  EXPECT_TRUE(tracker.AttemptFailed(absl::InfinitePast()));
  EXPECT_EQ(tracker.without_progress(), 0);
  for (int n = 1; n <= 3; ++n) {
    tracker.AttemptStarted(t0 + absl::Seconds(10 + n));
    EXPECT_FALSE(tracker.AttemptFailed(absl::InfinitePast()));
  }
  EXPECT_TRUE(tracker.Exhausted());
  EXPECT_NE(tracker.Describe().find("3 consecutive attempt(s)"),
            std::string::npos)
      << tracker.Describe();
  EXPECT_NE(tracker.Describe().find("progress_b"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ProgressTrackerTest, ActivityAfterTheStartIsProgress) {
  ProgressTracker tracker("", 2);
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  tracker.AttemptStarted(t0);
  // A FileTimer request of the attempt before does not count.
  EXPECT_FALSE(tracker.AttemptFailed(t0 - absl::Seconds(1)));
  tracker.AttemptStarted(t0 + absl::Seconds(5));
  EXPECT_TRUE(tracker.AttemptFailed(t0 + absl::Seconds(6)));
  EXPECT_EQ(tracker.without_progress(), 0);
}

TEST(ProgressTrackerTest, ZeroLimitNeverStops) {
  ProgressTracker tracker("", 0);
  for (int n = 0; n < 5; ++n) {
    tracker.AttemptStarted(absl::FromUnixSeconds(1700000000 + n));
    tracker.AttemptFailed(absl::InfinitePast());
  }
  EXPECT_EQ(tracker.without_progress(), 5);
  EXPECT_FALSE(tracker.Exhausted());
}

}  // namespace
}  // namespace distjob
