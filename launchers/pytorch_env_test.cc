#include "launchers/pytorch_env.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

PyTorchGroupInfo TwoNodesOfTwo() {
  PyTorchGroupInfo g;
  g.group_rank = 1;
  g.group_world_size = 2;
  g.base_rank = 2;
  g.world_size = 4;
  g.role_base_rank = 2;
  g.role_world_size = 4;
  g.local_world_size = 2;
  g.master_addr = "node-0";
  g.master_port = 29501;
  g.restart_count = 1;
  g.max_restarts = 3;
  g.run_id = "job";
  return g;
}

TEST(PyTorchWorkerEnvTest, SetsTorchrunContract) {
  EnvMap env = PyTorchWorkerEnv(TwoNodesOfTwo(), 1, {{"PATH", "/bin"}},
                                "/logs/attempt_1/1/error.json");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["ROLE_RANK"], "3");
  EXPECT_EQ(env["ROLE_NAME"], "default");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
  EXPECT_EQ(env["MASTER_ADDR"], "node-0");
  EXPECT_EQ(env["MASTER_PORT"], "29501");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
  EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"],
            "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], "/logs/attempt_1/1/error.json");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["PATH"], "/bin");
}

TEST(PyTorchWorkerEnvTest, SignalsToHandleAreTheLaunchsNotTheWorkersOwn) {
  // 2.x torchrun sets it in its own environment, over whatever was there.
  PyTorchGroupInfo g = TwoNodesOfTwo();
  g.signals_to_handle = "SIGTERM,SIGUSR1";
  EnvMap env = PyTorchWorkerEnv(
      g, 0, {{"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGINT"}}, "");
  EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGUSR1");
}

TEST(PyTorchWorkerEnvTest, KeepsUserSettingsOfDefaultedVariables) {
  EnvMap agent{{"OMP_NUM_THREADS", "8"},
               {"NCCL_ASYNC_ERROR_HANDLING", "0"},
               {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
  EnvMap env = PyTorchWorkerEnv(TwoNodesOfTwo(), 0, agent, "");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "8");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(env.count("TORCHELASTIC_ERROR_FILE"), 0u);
}

TEST(PyTorchWorkerEnvTest, NoOmpDefaultForOneWorker) {
  PyTorchGroupInfo g;
  g.local_world_size = 1;
  EnvMap env = PyTorchWorkerEnv(g, 0, {}, "");
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(env["RANK"], "0");
  EXPECT_EQ(env["WORLD_SIZE"], "1");
}

TEST(PyTorchWorkerEnvTest, OverridesStaleContractVariablesFromTheAgentEnv) {
  // An agent started by an operator that set RANK (the node rank) must not
  // leak it to workers as their global rank.
  EnvMap agent{{"RANK", "7"}, {"WORLD_SIZE", "9"}, {"LOCAL_RANK", "5"}};
  EnvMap env = PyTorchWorkerEnv(TwoNodesOfTwo(), 0, agent, "");
  EXPECT_EQ(env["RANK"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["LOCAL_RANK"], "0");
}

}  // namespace
}  // namespace distjob

namespace distjob {
namespace {

TEST(PyTorchWorkerEnvTest, VirtualLocalRankNarrowsTheDevices) {
  PyTorchGroupInfo g = TwoNodesOfTwo();
  g.virtual_local_rank = true;
  EnvMap env = PyTorchWorkerEnv(g, 1, {{"CUDA_VISIBLE_DEVICES", "4,6"}}, "");
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "6");
  EXPECT_EQ(PyTorchWorkerEnv(g, 1, {}, "")["CUDA_VISIBLE_DEVICES"], "1");
  g.virtual_local_rank = false;
  EXPECT_EQ(PyTorchWorkerEnv(g, 1, {}, "")["LOCAL_RANK"], "1");
}

}  // namespace
}  // namespace distjob
