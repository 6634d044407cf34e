#include "discovery/framework.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

const std::map<std::string, std::string> kRoles = DefaultTfRoles();

TEST(ChooseFrameworkTest, FromTaskNamesAndEnv) {
  auto pick = [](const char* replicas, const EnvMap& env = {}) {
    Cluster c;
    if (*replicas) c = *KubeflowPeers("j", replicas, "", "");
    return ChooseFramework(Framework::kAuto, c, env, kRoles).framework;
  };
  EXPECT_EQ(pick("scheduler=1,server=1,worker=1"), "mxnet");
  EXPECT_EQ(pick("ps=1,worker=2"), "tensorflow");
  EXPECT_EQ(pick("chief=1,worker=2"), "tensorflow");
  EXPECT_EQ(pick("master=1,worker=2"), "pytorch");
  // Workers only: MultiWorkerMirroredStrategy, as Volcano's plugin.
  EXPECT_EQ(pick("worker=2"), "tensorflow");
  EXPECT_EQ(pick("worker=2,launcher=1"), "none");
  EXPECT_EQ(pick("trainer=2"), "none");
  EXPECT_EQ(pick("worker=2", {{"TF_CONFIG", "{}"}}), "tensorflow");
  EXPECT_EQ(pick("", {{"DMLC_ROLE", "worker"}}), "mxnet");
  // Kubeflow's elastic PyTorchJob: worker replicas only, torchrun's PET_*.
  EXPECT_EQ(pick("worker=2", {{"PET_NNODES", "2:4"}}), "pytorch");
  EXPECT_EQ(pick("", {{"PET_RDZV_ENDPOINT", "j-worker-0:23456"}}), "pytorch");
  EXPECT_EQ(ChooseFramework(Framework::kTensorFlow, {}, {}, kRoles).framework,
            "tensorflow");
}

TEST(FrameworkTest, ParsesEveryNameAndRejectsOthers) {
  for (const char* name : {"auto", "pytorch", "tensorflow", "mxnet", "none"}) {
    auto f = ParseFramework(name);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_STREQ(FrameworkName(*f), name);
  }
  auto bad = ParseFramework("torch");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("'torch'"), std::string::npos);
}

}  // namespace
}  // namespace distjob
