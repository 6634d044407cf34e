#include "agent/preflight.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string TempDir() {
  std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/pfXXXXXX");
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A listening socket on 127.0.0.1; its port.
int Listen(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(*fd, 4), 0);
  socklen_t n = sizeof(a);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &n);
  return ntohs(a.sin_port);
}

TEST(PreflightTest, InfinibandPortStatesFromAFakeSysfs) {
  const std::string root = TempDir();
  for (const char* port : {"mlx5_0/ports/1", "mlx5_1/ports/1"}) {
    ASSERT_EQ(system(absl::StrCat("mkdir -p ", root, "/", port).c_str()), 0);
  }
  WriteFile(root + "/mlx5_0/ports/1/state", "4: ACTIVE\n");
  WriteFile(root + "/mlx5_1/ports/1/state", "1: DOWN\n");
  struct Case {
    bool required;
    PreflightClass down;
  } cases[] = {{false, PreflightClass::kWarning},
               {true, PreflightClass::kRetryable}};
  for (const Case& c : cases) {
    auto results = CheckInfiniband(root, c.required);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].target, "mlx5_0/1");
    EXPECT_EQ(results[0].result, PreflightClass::kPass);
    EXPECT_EQ(results[1].target, "mlx5_1/1");
    EXPECT_EQ(results[1].result, c.down);
    EXPECT_EQ(results[1].detail, "1: DOWN");
  }
  // No InfiniBand at all: fine unless the job asked for it.
  EXPECT_EQ(CheckInfiniband(root + "/none", false)[0].result,
            PreflightClass::kPass);
  EXPECT_EQ(CheckInfiniband(root + "/none", true)[0].result,
            PreflightClass::kRetryable);
}

TEST(PreflightTest, PathsByKind) {
  const std::string dir = TempDir();
  WriteFile(dir + "/file", "data");
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  struct Case {
    std::string path;
    bool writable;
    PreflightClass want;
  } cases[] = {
      {dir, false, PreflightClass::kPass},
      {dir + "/file", false, PreflightClass::kPass},
      // A FIFO is stat'ed, never opened: no reader, no hang.
      {dir + "/fifo", false, PreflightClass::kPass},
      {dir + "/missing", false, PreflightClass::kFatal},
      {dir, true, PreflightClass::kPass},
      {dir + "/file", true, PreflightClass::kFatal},
      {"/proc", true, PreflightClass::kFatal},
  };
  for (const Case& c : cases) {
    PreflightResult r =
        CheckPath(c.path, c.writable, absl::Seconds(5), nullptr);
    EXPECT_EQ(r.result, c.want)
        << c.path << " " << c.writable << ": " << r.detail;
  }
}

TEST(PreflightTest, Devices) {
  const std::string dir = TempDir();
  WriteFile(dir + "/accel0", "");
  EXPECT_EQ(CheckDevices(dir + "/accel[0-9]*", false).result,
            PreflightClass::kPass);
  EXPECT_EQ(CheckDevices(dir + "/nvidia[0-9]*", false).result,
            PreflightClass::kWarning);
  EXPECT_EQ(CheckDevices(dir + "/nvidia[0-9]*", true).result,
            PreflightClass::kRetryable);
}

TEST(PreflightTest, PortsAndTcpReach) {
  int fd = -1;
  const int port = Listen(&fd);
  EXPECT_EQ(CheckFreePort(port).result, PreflightClass::kRetryable);
  PreflightOptions options;
  options.timeout = absl::Seconds(2);
  EXPECT_EQ(
      CheckTcpReach(absl::StrCat("127.0.0.1:", port), options, nullptr).result,
      PreflightClass::kPass);
  close(fd);  // now nothing listens: refused, retryable
  EXPECT_EQ(CheckFreePort(port).result, PreflightClass::kPass);
  EXPECT_EQ(
      CheckTcpReach(absl::StrCat("127.0.0.1:", port), options, nullptr).result,
      PreflightClass::kRetryable);
  EXPECT_EQ(CheckTcpReach("no-port", options, nullptr).result,
            PreflightClass::kFatal);
}

// A DNS server on 127.0.0.1 that never answers: "IP:PORT".
std::string SilentDnsServer(int* fd) {
  *fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t n = sizeof(a);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &n);
  return absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
}

TEST(PreflightTest, NamesThatDoNotResolveAreRetryable) {
  PreflightOptions options;
  options.names = {"127.0.0.1", "master.invalid"};
  int fd = -1;
  options.dns_servers = {SilentDnsServer(&fd)};
  options.timeout = absl::Milliseconds(500);
  auto results = CheckNames(options, nullptr);
  close(fd);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].result, PreflightClass::kPass);
  EXPECT_EQ(results[1].result, PreflightClass::kRetryable);
  EXPECT_LT(results[1].elapsed, absl::Seconds(3));
}

TEST(PreflightTest, AStopEndsAWaitWithinASecond) {
  PreflightOptions options;
  options.names = {"master.invalid"};
  options.rdzv_endpoint = "master.invalid:29400";
  options.paths = {"/"};
  int fd = -1;
  options.dns_servers = {SilentDnsServer(&fd)};
  options.timeout = absl::Seconds(30);
  const absl::Time start = absl::Now();
  const absl::Time stop_at = start + absl::Milliseconds(200);
  auto results =
      RunPreflight(options, [stop_at] { return absl::Now() >= stop_at; });
  close(fd);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  // The name check was cut short; nothing after it ran.
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].detail, "stopped");
}

TEST(PreflightTest, HealthDaemonWithoutSocketIsAWarning) {
  PreflightResult r = CheckHealthDaemon("unix:///nonexistent/nvhcd.sock",
                                        absl::Seconds(1), nullptr);
  EXPECT_EQ(r.result, PreflightClass::kWarning);
}

TEST(PreflightTest, OverallIsTheWorstAndTheJsonSaysIt) {
  std::vector<PreflightResult> results(3);
  results[0].result = PreflightClass::kWarning;
  results[1].result = PreflightClass::kFatal;
  results[2].result = PreflightClass::kRetryable;
  EXPECT_EQ(Overall(results), PreflightClass::kFatal);
  EXPECT_EQ(Overall({}), PreflightClass::kPass);
  Json json = PreflightJson(results);
  EXPECT_EQ(json["result"], "fatal");
  EXPECT_EQ(json["exit_code"], 30);
  EXPECT_EQ(json["checks"].size(), 3u);
}

}  // namespace
}  // namespace distjob
