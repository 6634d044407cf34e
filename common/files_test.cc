#include "common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/" + name;
}

TEST(ReadSmallFileTest, ReadsUpToTheLimitAndNothingFromAMissingFile) {
  const std::string path = TempPath("small.txt");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string text(10000, 'x');
  std::fputs(text.c_str(), f);
  std::fclose(f);
  EXPECT_EQ(ReadSmallFile(path), text);
  EXPECT_EQ(ReadSmallFile(path, 5000), text.substr(0, 5000));
  EXPECT_EQ(ReadSmallFile(path + ".missing"), "");
  EXPECT_EQ(ReadSmallRegularFile(path + ".missing").status().code(),
            absl::StatusCode::kNotFound);
}

// A worker may leave a FIFO where the agent reads its progress or error
// file; a blocking open() would wait for a writer forever.
TEST(ReadSmallFileTest, AFifoIsRefusedWithoutBlocking) {
  const std::string path = TempPath("worker.fifo");
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto read = std::async(std::launch::async,
                         [&path] { return ReadSmallRegularFile(path); });
  if (read.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Give the blocked open() its writer so the test ends.
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    read.wait();
    FAIL() << "reading a FIFO blocked";
  }
  const absl::StatusOr<std::string> text = read.get();
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(text.status().message().find(path), std::string::npos)
      << text.status();
  EXPECT_EQ(ReadSmallFile(path), "");
  unlink(path.c_str());
}

}  // namespace
}  // namespace distjob
