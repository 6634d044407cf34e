#include "launchers/framework_env.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

JobEnv Identified(const std::string& framework, const Identity& self,
                  std::vector<TaskPeers> tasks) {
  JobEnv job;
  job.framework = framework;
  job.has_identity = true;
  job.identity.id = self;
  job.cluster.source = PeerSource::kVolcano;
  job.cluster.tasks = std::move(tasks);
  return job;
}

TEST(FrameworkEnvTest, TensorFlowJobGetsTfConfig) {
  const JobEnv job =
      Identified("tensorflow", {"tf", "worker", 1},
                 {{"ps", {"tf-ps-0.tf"}, "test"},
                  {"worker", {"tf-worker-0.tf", "tf-worker-1.tf"}, "test"}});
  auto env = FrameworkEnv(job, DiscoveryOptions(), {});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->vars.at("TF_CONFIG"),
            "{\"cluster\":{\"ps\":[\"tf-ps-0.tf:2222\"],\"worker\":[\"tf-"
            "worker-0.tf:2222\",\"tf-worker-1.tf:2222\"]},\"task\":{\"type\":"
            "\"worker\",\"index\":1}}");
}

TEST(FrameworkEnvTest, MXNetJobGetsDmlcVariablesOnItsPort) {
  const JobEnv job = Identified("mxnet", {"mx", "worker", 0},
                                {{"scheduler", {"mx-scheduler-0.mx"}, "test"},
                                 {"server", {"mx-server-0.mx"}, "test"},
                                 {"worker", {"mx-worker-0.mx"}, "test"}});
  DiscoveryOptions options;
  options.mxnet_port = 9999;
  auto env = FrameworkEnv(job, options, {});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->vars.at("DMLC_ROLE"), "worker");
  EXPECT_EQ(env->vars.at("DMLC_PS_ROOT_PORT"), "9999");
}

TEST(FrameworkEnvTest, PyTorchAndUnidentifiedJobsGetNothing) {
  JobEnv pytorch = Identified("pytorch", {"pt", "worker", 0},
                              {{"worker", {"pt-worker-0.pt"}, "test"}});
  auto env = FrameworkEnv(pytorch, DiscoveryOptions(), {});
  ASSERT_TRUE(env.ok());
  EXPECT_TRUE(env->vars.empty());
  auto none = FrameworkEnv(JobEnv(), DiscoveryOptions(), {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->vars.empty());
}

TEST(FrameworkEnvTest, KeptTfConfigMustBeAJsonObject) {
  auto bad =
      FrameworkEnv(JobEnv(), DiscoveryOptions(), {{"TF_CONFIG", "not json"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("TF_CONFIG"), std::string::npos);
  auto kept = FrameworkEnv(JobEnv(), DiscoveryOptions(),
                           {{"TF_CONFIG", "{\"cluster\":{}}"}});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->vars.empty());
}

}  // namespace
}  // namespace distjob
