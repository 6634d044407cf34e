#include "discovery/peers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace distjob {
namespace {

class VolcanoDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volcano_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(VolcanoDir, ReadsHostFilesInOrderWithDashedNames) {
  Write("ps_server.host", "j-ps-server-0.j");
  Write("worker.host", "j-worker-1.j\nj-worker-0.j");  // order is the index
  Write("VC_WORKER_NUM", "2");  // the mounted ConfigMap's other keys
  auto c = ReadVolcanoPeers(dir_, {{"VC_WORKER_NUM", "2"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, PeerSource::kVolcano);
  ASSERT_EQ(c->tasks.size(), 2u);
  EXPECT_EQ(c->tasks[0].task, "ps-server");
  EXPECT_EQ(c->tasks[1].hosts,
            (std::vector<std::string>{"j-worker-1.j", "j-worker-0.j"}));
}

TEST_F(VolcanoDir, EnvOnlyAndNothing) {
  auto none = ReadVolcanoPeers(dir_ + "/missing", {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->source, PeerSource::kNone);
  auto env = ReadVolcanoPeers(
      dir_ + "/missing",
      {{"VC_PS_SERVER_HOSTS", "a.j,b.j"}, {"VC_PS_SERVER_NUM", "2"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->tasks[0].task, "ps-server");
  EXPECT_EQ(env->tasks[0].hosts.size(), 2u);
}

TEST_F(VolcanoDir, MalformedInputsNameTheInput) {
  Write("worker.host", "");
  auto empty = ReadVolcanoPeers(dir_, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("worker.host"), std::string::npos);

  Write("worker.host", "a\na");
  auto dup = ReadVolcanoPeers(dir_, {});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate host 'a'"),
            std::string::npos);

  Write("worker.host", "a\nb");
  auto num = ReadVolcanoPeers(dir_, {{"VC_WORKER_NUM", "3"}});
  ASSERT_FALSE(num.ok());
  EXPECT_NE(num.status().message().find("VC_WORKER_NUM"), std::string::npos);

  auto bad_num = ReadVolcanoPeers(dir_, {{"VC_WORKER_NUM", "x"}});
  EXPECT_FALSE(bad_num.ok());

  if (geteuid() != 0) {
    chmod((dir_ + "/worker.host").c_str(), 0);
    EXPECT_FALSE(ReadVolcanoPeers(dir_, {}).ok());
  }
}

TEST_F(VolcanoDir, FifoOrDeviceIsRefusedByTypeWithoutOpeningIt) {
  // Opening a FIFO with no writer for reading would block: the test
  // finishing at all shows it is not waited on.
  ASSERT_EQ(mkfifo((dir_ + "/worker.host").c_str(), 0600), 0);
  auto fifo = ReadVolcanoPeers(dir_, {});
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fifo.status().message().find("worker.host"), std::string::npos);
  EXPECT_NE(fifo.status().message().find("FIFO"), std::string::npos);
  std::filesystem::remove(dir_ + "/worker.host");
  ASSERT_EQ(symlink("/dev/zero", (dir_ + "/worker.host").c_str()), 0);
  auto device = ReadVolcanoPeers(dir_, {});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("character device"),
            std::string::npos);
}

// An absent directory is "not Volcano"; a FIFO or file named as the
// directory is a wrong flag, said as such.
TEST_F(VolcanoDir, ADirectoryThatIsAFifoIsRefused) {
  const std::string fifo = dir_ + "/volcano.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto peers = ReadVolcanoPeers(fifo, {});
  ASSERT_FALSE(peers.ok());
  EXPECT_EQ(peers.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(peers.status().message().find("--volcano-dir '" + fifo + "'"),
            std::string::npos)
      << peers.status();
  EXPECT_TRUE(ReadVolcanoPeers(dir_ + "/absent", {}).ok());
}

TEST(PeersFileTest, AFifoIsRefusedNamingTheFlag) {
  const std::string fifo = std::string(::testing::TempDir()) + "/peers.fifo";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto peers = ReadPeersFile(fifo);
  ASSERT_FALSE(peers.ok());
  EXPECT_NE(peers.status().message().find("--peers-file"), std::string::npos)
      << peers.status();
  unlink(fifo.c_str());
}

TEST_F(VolcanoDir, HostsThatAreNotDnsNamesAreRefused) {
  for (const std::string& bad :
       {std::string("j-0.j\nj 1.j"), std::string("-rf"), std::string("a\0b", 3),
        std::string("\x7f\x45LF\x02")}) {
    Write("worker.host", bad);
    auto c = ReadVolcanoPeers(dir_, {});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("worker.host"), std::string::npos);
    EXPECT_EQ(c.status().message().find('\n'), std::string::npos);
  }
  std::filesystem::remove(dir_ + "/worker.host");
  auto env = ReadVolcanoPeers(dir_, {{"VC_WORKER_HOSTS", "a.j,b j"}});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("VC_WORKER_HOSTS"), std::string::npos);
}

TEST(KubeflowPeersTest, HostForms) {
  auto c = KubeflowPeers("my-job", "worker=2,ps=1", "ns", "cluster.local");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Find("worker")->hosts[1],
            "my-job-worker-1.ns.svc.cluster.local");
  auto s = KubeflowPeers("my-job", "Worker=1", "", "");
  EXPECT_EQ(s->Find("worker")->hosts[0], "my-job-worker-0");
  EXPECT_FALSE(KubeflowPeers("j", "worker=0", "", "").ok());
  EXPECT_FALSE(KubeflowPeers("j", "worker", "", "").ok());
  EXPECT_FALSE(KubeflowPeers("j", "worker=1,worker=2", "", "").ok());
  EXPECT_FALSE(KubeflowPeers("", "worker=1", "", "").ok());
}

TEST(StaticPeersTest, ParsesAndRejects) {
  auto c = ParseStaticPeers("worker=h1,h2;ps=h3", "flag --peers");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->TotalHosts(), 3);
  EXPECT_EQ(c->Find("worker")->hosts[1], "h2");
  EXPECT_FALSE(ParseStaticPeers("", "x").ok());
  EXPECT_FALSE(ParseStaticPeers("h1,h2", "x").ok());
  EXPECT_FALSE(ParseStaticPeers("worker=", "x").ok());
  EXPECT_FALSE(ParseStaticPeers("worker=a,a", "x").ok());
  EXPECT_FALSE(ReadPeersFile("/nonexistent/peers").ok());
}

}  // namespace
}  // namespace distjob
