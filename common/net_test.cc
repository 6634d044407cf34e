#include "common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(IsIpLiteralTest, AddressesAreLiterals) {
  EXPECT_TRUE(IsIpLiteral("127.0.0.1"));
  EXPECT_TRUE(IsIpLiteral("10.1.2.3"));
  EXPECT_TRUE(IsIpLiteral("::1"));
  EXPECT_TRUE(IsIpLiteral("fe80::1"));
  EXPECT_TRUE(IsIpLiteral("[::1]"));
}

TEST(CheckHostNameTest, AcceptsAddressesAndDnsNames) {
  EXPECT_TRUE(CheckHostName("10.0.0.1", "--x").ok());
  EXPECT_TRUE(CheckHostName("[fd00::1]", "--x").ok());
  EXPECT_TRUE(CheckHostName("fd00::1", "--x").ok());
  EXPECT_TRUE(CheckHostName("localhost", "--x").ok());
  EXPECT_TRUE(CheckHostName("job-worker-0.job.ns.svc.", "--x").ok());
  EXPECT_TRUE(CheckHostName("proj_web_1", "--x").ok());
}

TEST(CheckHostNameTest, RefusesWhatIsNotAName) {
  for (absl::string_view bad :
       {absl::string_view(""), absl::string_view("a b"),
        absl::string_view("-rf"), absl::string_view("http://h"),
        absl::string_view("a:b:c"), absl::string_view("a..b"),
        absl::string_view("h\n"), absl::string_view("h\0x", 3),
        absl::string_view("127.0.0.1\0x", 11)}) {
    absl::Status s = CheckHostName(bad, "--local-addr");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--local-addr"), absl::string_view::npos);
    EXPECT_EQ(s.message().find('\n'), absl::string_view::npos);
  }
  EXPECT_FALSE(CheckHostName(std::string(64, 'a'), "--x").ok());
  EXPECT_FALSE(CheckHostName(std::string(300, 'a'), "--x").ok());
}

TEST(IsIpLiteralTest, NamesAndJunkAreNot) {
  EXPECT_FALSE(IsIpLiteral("localhost"));
  EXPECT_FALSE(IsIpLiteral("job-worker-0.job"));
  EXPECT_FALSE(IsIpLiteral(""));
  EXPECT_FALSE(IsIpLiteral("[]"));
  EXPECT_FALSE(IsIpLiteral("[127.0.0.1"));
  EXPECT_FALSE(IsIpLiteral("127.0.0.1:29400"));
  EXPECT_FALSE(IsIpLiteral("256.0.0.1"));
}

TEST(LocalHostnameTest, IsTheKernelsName) {
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  EXPECT_EQ(LocalHostname(), name);
  EXPECT_FALSE(LocalHostname().empty());
}

TEST(FindFreePortTest, PortCanBeBound) {
  auto port = FindFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_GT(*port, 0);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST(FindFreePortTest, RejectsWhatIsNoHostNameNamingIt) {
  auto port = FindFreePort("no such host");
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(port.status().message().find("no such host"), std::string::npos);
}

// Names are not resolved (no NSS in a static binary): a name no resolver
// knows still gets a port, free on every interface.
TEST(FindFreePortTest, NameIsNotResolved) {
  auto port = FindFreePort("no-such-host.invalid");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  auto v6 = FindFreePort("[::1]");
  // Hosts without IPv6 refuse the bind.
  if (v6.ok()) {
    EXPECT_GT(*v6, 0);
  }
}

}  // namespace
}  // namespace distjob

#include <cstdlib>
#include <fstream>

namespace distjob {
namespace {

// A pod with hostname and subdomain under a headless Service: the kubelet
// writes its FQDN first on its /etc/hosts line.
TEST(FqdnTest, CanonicalNameFromTheHostsFile) {
  const std::string hosts = std::string(std::getenv("TEST_TMPDIR")) + "/hosts";
  std::ofstream(hosts) << "127.0.0.1 localhost\n"
                          "10.1.2.3 pod-0.sub.ns.svc.cluster.local pod-0\n"
                          "10.1.2.4 bare-1\n";
  EXPECT_EQ(Fqdn("pod-0", absl::Seconds(1), hosts),
            "pod-0.sub.ns.svc.cluster.local");
  // Named by the file without a dot: the host itself, and no DNS query
  // (a 1 ns budget would leave no time for one).
  EXPECT_EQ(Fqdn("bare-1", absl::Nanoseconds(1), hosts), "bare-1");
  EXPECT_EQ(Fqdn("10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(Fqdn(""), "");
}

}  // namespace
}  // namespace distjob
