#include "agent/rsh_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

class RshEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rsh-env-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.mpi.spawn_port = 4321;
  }
  void TearDown() override {
    unlink((dir_ + "/" + kRshTokenFile).c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_;
  RunOptions options_;
};

TEST_F(RshEnvTest, ATokenFromTheVariableGoesAsAFileOnly) {
  options_.security.token = "s3cret";
  auto env = MakeRshEnv(
      options_, {{"DISTJOB_RDZV_TOKEN", "s3cret"}, {"PATH", "/bin"}}, dir_);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->count("DISTJOB_RDZV_TOKEN"), 0u);
  for (const auto& [name, value] : *env) {
    EXPECT_EQ(value.find("s3cret"), std::string::npos) << name;
  }
  const std::string path = env->at("DISTJOB_RDZV_TOKEN_FILE");
  EXPECT_EQ(path, dir_ + "/" + kRshTokenFile);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "s3cret");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(env->at("DISTJOB_SPAWN_PORT"), "4321");
  EXPECT_EQ(env->at("PATH"), "/bin");
}

TEST_F(RshEnvTest, AGivenTokenFileAndTlsFilesGoAsTheirPaths) {
  options_.security.token = "s3cret";
  options_.security_files.token_file = "/etc/job/token";
  options_.security_files.tls_cert = "/etc/job/tls.crt";
  auto env = MakeRshEnv(options_, {}, dir_);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->at("DISTJOB_RDZV_TOKEN_FILE"), "/etc/job/token");
  EXPECT_EQ(env->at("DISTJOB_RDZV_TLS_CERT"), "/etc/job/tls.crt");
  EXPECT_EQ(env->count("DISTJOB_RDZV_TLS_KEY"), 0u);
  EXPECT_NE(access((dir_ + "/" + kRshTokenFile).c_str(), F_OK), 0);
}

TEST_F(RshEnvTest, NoPrivateDirectoryForATokenIsAnError) {
  options_.security.token = "s3cret";
  EXPECT_FALSE(MakeRshEnv(options_, {}, "").ok());
  options_.security.token.clear();  // mutual TLS: no token, no file
  EXPECT_TRUE(MakeRshEnv(options_, {}, "").ok());
}

}  // namespace
}  // namespace distjob
