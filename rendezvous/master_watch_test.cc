#include "rendezvous/master_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "common/logging.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

// A loopback port: bound only (connections refused), or listening.
class Port {
 public:
  explicit Port(bool listening) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    if (listening) {
      EXPECT_EQ(listen(fd_, 4), 0);
    }
    socklen_t size = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size);
    port_ = ntohs(a.sin_port);
  }
  ~Port() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_;
};

TEST(ProbeTcpTest, SaysRefusedWithTheAddressOrOk) {
  Port refused(false);
  const absl::Status s =
      ProbeTcp("127.0.0.1", refused.port(), absl::Milliseconds(500));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(s.message(), "connection refused by 127.0.0.1:" +
                             std::to_string(refused.port()));
  Port open(true);
  EXPECT_TRUE(ProbeTcp("127.0.0.1", open.port(), absl::Milliseconds(500)).ok());
}

// Lines while the master refuses, none once it accepts; the destructor
// ends the watch promptly.
TEST(MasterWatchTest, LogsOncePerIntervalWhileTheMasterRefuses) {
  InitLogging(LogLevel::kInfo);
  Port refused(false);
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  {
    MasterWatch watch("127.0.0.1", refused.port(), absl::Milliseconds(100));
    absl::SleepFor(absl::Milliseconds(450));
  }
  const std::string log = testing::internal::GetCapturedStdout() +
                          testing::internal::GetCapturedStderr();
  const std::string line = "still waiting for the master 127.0.0.1:" +
                           std::to_string(refused.port()) +
                           " (node rank 0's store; --master-addr, "
                           "--master-port): connection refused by 127.0.0.1:" +
                           std::to_string(refused.port());
  EXPECT_NE(log.find(line), std::string::npos) << log;

  Port open(true);
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  {
    MasterWatch watch("127.0.0.1", open.port(), absl::Milliseconds(100));
    absl::SleepFor(absl::Milliseconds(300));
  }
  const std::string quiet = testing::internal::GetCapturedStdout() +
                            testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet.find("still waiting"), std::string::npos) << quiet;
}

}  // namespace
}  // namespace distjob
