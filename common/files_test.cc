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

void WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

TEST(ReadInputFileTest, ReadsARegularFileWhole) {
  const std::string path = TempPath("input.txt");
  WriteText(path, "hello\n");
  const absl::StatusOr<std::string> text = ReadInputFile("--x", path, 6);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hello\n");
}

TEST(ReadInputFileTest, RefusesAFileLargerThanTheBoundNamingTheFlag) {
  const std::string path = TempPath("big.txt");
  WriteText(path, std::string(100, 'x'));
  const absl::StatusOr<std::string> text = ReadInputFile("--x", path, 99);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("--x '" + path + "'"),
            std::string::npos)
      << text.status();
  EXPECT_NE(text.status().message().find("99 bytes"), std::string::npos);
}

TEST(ReadInputFileTest, AMissingFileIsInvalidArgumentNamingTheVariable) {
  const absl::StatusOr<std::string> text =
      ReadInputFile("SOME_VAR", TempPath("absent.txt"), 10);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("SOME_VAR"), std::string::npos);
}

TEST(ReadInputFileTest, RefusesAFifoAndADirectoryWithoutBlocking) {
  const std::string path = TempPath("input.fifo");
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto read = std::async(std::launch::async,
                         [&path] { return ReadInputFile("--x", path, 10); });
  if (read.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    read.wait();
    FAIL() << "reading a FIFO blocked";
  }
  const absl::StatusOr<std::string> text = read.get();
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("a FIFO"), std::string::npos)
      << text.status();
  unlink(path.c_str());
  const absl::StatusOr<std::string> dir =
      ReadInputFile("--x", TempPath(""), 10);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("a directory"), std::string::npos)
      << dir.status();
}

TEST(OutputFileTest, AFifoIsRefusedAtTheCheckAndAtTheOpenWithoutBlocking) {
  const std::string path = TempPath("output.fifo");
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const absl::Status checked = CheckOutputFile("--termination-log", path);
  EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(checked.message().find("--termination-log"), std::string::npos);
  // Without a reader, and with one (which a blocking open would not mind,
  // but whose writes could then block).
  EXPECT_EQ(OpenOutputFile("--x", path, O_TRUNC).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const int reader = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(OpenOutputFile("--x", path, O_APPEND).status().code(),
            absl::StatusCode::kFailedPrecondition);
  close(reader);
  unlink(path.c_str());
}

TEST(OutputFileTest, AbsentRegularAndDevNullAreWritable) {
  const std::string path = TempPath("output.txt");
  unlink(path.c_str());
  EXPECT_TRUE(CheckOutputFile("--x", path).ok());
  absl::StatusOr<int> fd = OpenOutputFile("--x", path, O_TRUNC);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  EXPECT_TRUE(CheckOutputFile("--x", path).ok());
  EXPECT_TRUE(CheckOutputFile("--x", "/dev/null").ok());
  EXPECT_EQ(CheckOutputFile("--x", TempPath("")).code(),
            absl::StatusCode::kFailedPrecondition);
  unlink(path.c_str());
}

}  // namespace
}  // namespace distjob
