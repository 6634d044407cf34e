#include "common/console_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

class ConsoleWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The agent keeps SIGPIPE blocked; here it would end the test.
    signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(pipe2(fds_, O_CLOEXEC), 0);
  }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int fds_[2] = {-1, -1};
};

TEST_F(ConsoleWriterTest, WritesWhatAReaderTakes) {
  ConsoleWriter writer(fds_[1], absl::Milliseconds(50));
  EXPECT_EQ(writer.Write("hello\n"), ConsoleWriter::Result::kWritten);
  char buf[16];
  ASSERT_EQ(read(fds_[0], buf, sizeof(buf)), 6);
  EXPECT_EQ(std::string(buf, 6), "hello\n");
}

// A reader that holds the pipe open and never reads costs one stall limit,
// then nothing: the agent's next log line or copy is dropped at once.
TEST_F(ConsoleWriterTest, AFullPipeStallsOnceThenDropsAtOnce) {
  ConsoleWriter writer(fds_[1], absl::Milliseconds(50));
  const std::string big(4 << 20, 'x');  // more than any pipe holds
  const absl::Time start = absl::Now();
  EXPECT_EQ(writer.Write(big), ConsoleWriter::Result::kStalled);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  const absl::Time again = absl::Now();
  EXPECT_EQ(writer.Write("next\n"), ConsoleWriter::Result::kStalled);
  EXPECT_LT(absl::Now() - again, absl::Milliseconds(40));
  // Once the reader drains the pipe, writing resumes.
  char buf[65536];
  fcntl(fds_[0], F_SETFL, O_NONBLOCK);
  while (read(fds_[0], buf, sizeof(buf)) > 0) {
  }
  EXPECT_EQ(writer.Write("after\n"), ConsoleWriter::Result::kWritten);
}

TEST_F(ConsoleWriterTest, AReaderThatWentAwayEndsWriting) {
  ConsoleWriter writer(fds_[1], absl::Milliseconds(50));
  close(fds_[0]);
  fds_[0] = -1;
  EXPECT_EQ(writer.Write("lost\n"), ConsoleWriter::Result::kGone);
  EXPECT_EQ(writer.Write("lost\n"), ConsoleWriter::Result::kGone);
}

// The workers share the inherited description: it must stay blocking.
TEST_F(ConsoleWriterTest, InheritedDescriptionStaysBlocking) {
  ConsoleWriter writer(fds_[1], absl::Milliseconds(50));
  EXPECT_EQ(writer.Write("x"), ConsoleWriter::Result::kWritten);
  EXPECT_EQ(fcntl(fds_[1], F_GETFL) & O_NONBLOCK, 0);
}

}  // namespace
}  // namespace distjob
