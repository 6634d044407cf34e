#include "launchers/framework.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

const std::map<std::string, std::string> kRoles = TensorFlowOptions().roles;

TEST(ChooseFrameworkTest, FromTaskNamesAndEnv) {
  auto pick = [](const char* replicas, const EnvMap& env = {}) {
    Cluster c;
    if (*replicas) c = *KubeflowPeers("j", replicas, "", "");
    return ChooseFramework("auto", c, env, kRoles).framework;
  };
  EXPECT_EQ(pick("scheduler=1,server=1,worker=1"), "mxnet");
  EXPECT_EQ(pick("ps=1,worker=2"), "tensorflow");
  EXPECT_EQ(pick("chief=1,worker=2"), "tensorflow");
  EXPECT_EQ(pick("master=1,worker=2"), "pytorch");
  EXPECT_EQ(pick("worker=2"), "none");
  EXPECT_EQ(pick("worker=2", {{"TF_CONFIG", "{}"}}), "tensorflow");
  EXPECT_EQ(pick("", {{"DMLC_ROLE", "worker"}}), "mxnet");
  // Kubeflow's elastic PyTorchJob: worker replicas only, torchrun's PET_*.
  EXPECT_EQ(pick("worker=2", {{"PET_NNODES", "2:4"}}), "pytorch");
  EXPECT_EQ(pick("", {{"PET_RDZV_ENDPOINT", "j-worker-0:23456"}}), "pytorch");
  EXPECT_EQ(ChooseFramework("tensorflow", {}, {}, kRoles).framework,
            "tensorflow");
}

}  // namespace
}  // namespace distjob
