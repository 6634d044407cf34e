#include "supervisor/file_timer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

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

// As FileTimerClient writes: open, one write, close.
void Send(const std::string& path, const std::string& bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  close(fd);
}

std::string Request(int pid, const std::string& scope, double expiration) {
  return "{\"version\": 1, \"pid\": " + std::to_string(pid) +
         ", \"scope_id\": \"" + scope +
         "\", \"expiration_time\": " + std::to_string(expiration) +
         ", \"signal\": 9}\n";
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(FileTimerServerTest, ReplacesAFileAndServesAFifo) {
  const std::string path = TempPath("timer_replace");
  { std::ofstream(path) << "stale"; }
  auto server = FileTimerServer::Create(path);
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_FALSE(Readable((*server)->fd()));
  server->reset();
  EXPECT_NE(stat(path.c_str(), &st), 0) << "the FIFO outlived its server";
}

TEST(FileTimerServerTest, AppliesRequestsAndReleases) {
  const std::string path = TempPath("timer_apply");
  auto server = FileTimerServer::Create(path);
  ASSERT_TRUE(server.ok()) << server.status();
  FileTimerServer& s = **server;
  EXPECT_EQ(s.last_request(), absl::InfinitePast());
  Send(path, Request(10, "a", 1700000005) + Request(11, "b", 1700000003));
  EXPECT_TRUE(Readable(s.fd()));
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  s.ReadAvailable(now);
  EXPECT_EQ(s.table().size(), 2u);
  EXPECT_EQ(s.table().NextExpiry(), absl::FromUnixSeconds(1700000003));
  EXPECT_EQ(s.last_request(), now);
  // Every writer gone: no EOF, nothing readable (no busy wake-ups).
  EXPECT_FALSE(Readable(s.fd()));
  Send(path, Request(11, "b", -1));
  s.ReadAvailable(now);
  EXPECT_EQ(s.table().size(), 1u);
}

TEST(FileTimerServerTest, JunkAndOversizedLinesAreRefusedAlone) {
  const std::string path = TempPath("timer_junk");
  auto server = FileTimerServer::Create(path);
  ASSERT_TRUE(server.ok()) << server.status();
  FileTimerServer& s = **server;
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  Send(path, "not json\n{\"version\":1}\n");
  s.ReadAvailable(now);
  EXPECT_EQ(s.table().size(), 0u);
  EXPECT_EQ(s.last_request(), absl::InfinitePast());
  // 10 KB without a newline, in pieces, then its end and a good line: the
  // long line is dropped whole and the next one still counts.
  const std::string big(5000, 'x');
  Send(path, big);
  s.ReadAvailable(now);
  Send(path, big);
  s.ReadAvailable(now);
  Send(path, "tail of the long line\n" + Request(10, "a", 1700000005));
  s.ReadAvailable(now);
  EXPECT_EQ(s.table().size(), 1u);
}

TEST(FileTimerServerTest, ALineSplitAcrossReadsIsJoined) {
  const std::string path = TempPath("timer_split");
  auto server = FileTimerServer::Create(path);
  ASSERT_TRUE(server.ok()) << server.status();
  FileTimerServer& s = **server;
  const std::string line = Request(10, "a", 1700000005);
  Send(path, line.substr(0, 20));
  s.ReadAvailable(absl::Now());
  EXPECT_EQ(s.table().size(), 0u);
  Send(path, line.substr(20));
  s.ReadAvailable(absl::Now());
  EXPECT_EQ(s.table().size(), 1u);
}

TEST(FileTimerServerTest, ANonexistentDirectoryIsAnErrorNamingThePath) {
  auto server = FileTimerServer::Create("/nonexistent-dir/timer");
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("/nonexistent-dir/timer"),
            std::string::npos)
      << server.status();
}

}  // namespace
}  // namespace distjob
