#include "agent/worker_env.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(WorkerEnvTest, StaticMultiNodeIsFullyDecided) {
  LaunchOptions launch;
  launch.min_nodes = launch.max_nodes = 3;
  launch.node_rank = 2;
  launch.nproc = 4;
  launch.master_addr = "m";
  launch.master_port = 1234;
  const WorkerRound round = PlanRound(launch);
  EXPECT_TRUE(round.undecided.empty());
  const EnvMap env = BuildWorkerEnv(JobEnv{}, round.group, 1, {}, {});
  EXPECT_EQ(env.at("RANK"), "9");
  EXPECT_EQ(env.at("GROUP_RANK"), "2");
  EXPECT_EQ(env.at("WORLD_SIZE"), "12");
  EXPECT_EQ(env.at("MASTER_ADDR"), "m");
  EXPECT_EQ(env.at("MASTER_PORT"), "1234");
  EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), "none");
}

TEST(WorkerEnvTest, ElasticRanksAreDecidedAtRendezvous) {
  LaunchOptions launch;
  launch.rdzv_backend = RdzvBackend::kC10d;
  launch.min_nodes = 2;
  launch.max_nodes = 4;
  const WorkerRound round = PlanRound(launch);
  for (const char* key :
       {"RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE",
        "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    ASSERT_TRUE(round.undecided.count(key)) << key;
    EXPECT_NE(round.undecided.at(key).find("nnodes 2:4"), std::string::npos);
  }
  EXPECT_FALSE(round.undecided.count("TORCHELASTIC_RUN_ID"));
}

TEST(WorkerEnvTest, OneNodeLeavesOnlyThePortAndStandaloneTheRunId) {
  LaunchOptions launch;
  launch.nproc = 2;
  WorkerRound round = PlanRound(launch);
  EXPECT_EQ(round.undecided.size(), 1u);
  EXPECT_TRUE(round.undecided.count("MASTER_PORT"));
  EXPECT_EQ(round.group.world_size, 2);
  EXPECT_EQ(round.group.master_addr, "127.0.0.1");
  launch.standalone = true;
  launch.rdzv_backend = RdzvBackend::kC10d;
  round = PlanRound(launch);
  EXPECT_TRUE(round.undecided.count("TORCHELASTIC_RUN_ID"));
}

TEST(WorkerEnvTest, EveryRoundStartsFromTheLaunchsOwnFields) {
  LaunchOptions launch;
  launch.nproc = 3;
  launch.role = "trainer";
  launch.max_restarts = 5;
  launch.virtual_local_rank = true;
  launch.signals_to_handle = "SIGTERM,SIGUSR1";
  const PyTorchGroupInfo g = LaunchGroupFields(launch);
  EXPECT_EQ(g.local_world_size, 3);
  EXPECT_EQ(g.role_name, "trainer");
  EXPECT_EQ(g.max_restarts, 5);
  EXPECT_TRUE(g.virtual_local_rank);
  EXPECT_EQ(g.signals_to_handle, "SIGTERM,SIGUSR1");
  // `env`'s plan carries the same.
  const PyTorchGroupInfo planned = PlanRound(launch).group;
  EXPECT_EQ(planned.role_name, "trainer");
  EXPECT_EQ(planned.max_restarts, 5);
  EXPECT_EQ(planned.signals_to_handle, "SIGTERM,SIGUSR1");
}

TEST(WorkerEnvTest, FrameworkVariablesAndFilesOnTopOfTheAgentEnv) {
  JobEnv job;
  job.extra.Set("TF_CONFIG", "{}", "test");
  const EnvMap env =
      BuildWorkerEnv(job, PyTorchGroupInfo{}, 0, {{"TF_CONFIG", "old"}},
                     {"/e/error.json", "/e/heartbeat", "/p/progress.json",
                      "/t/watchdog_timer_1", "/e/worker.sock"});
  EXPECT_EQ(env.at("TF_CONFIG"), "{}");
  EXPECT_EQ(env.at("TORCHELASTIC_ERROR_FILE"), "/e/error.json");
  EXPECT_EQ(env.at("DISTJOB_HEARTBEAT_FILE"), "/e/heartbeat");
  EXPECT_EQ(env.at("DISTJOB_PROGRESS_FILE"), "/p/progress.json");
  EXPECT_EQ(env.at("TORCHELASTIC_TIMER_FILE"), "/t/watchdog_timer_1");
  EXPECT_EQ(env.at("TORCH_WORKER_SERVER_SOCKET"), "/e/worker.sock");
}

TEST(WorkerEnvTest, NoProgressOrTimerFileWhenNotServed) {
  const EnvMap env =
      BuildWorkerEnv(JobEnv{}, PyTorchGroupInfo{}, 0, {},
                     {"/e/error.json", "/e/heartbeat", "", "", ""});
  EXPECT_EQ(env.count("DISTJOB_PROGRESS_FILE"), 0u);
  EXPECT_EQ(env.count("TORCHELASTIC_TIMER_FILE"), 0u);
  EXPECT_EQ(env.count("TORCH_WORKER_SERVER_SOCKET"), 0u);
}

TEST(WorkerEnvTest, TheStoreTokenNeverReachesAWorker) {
  const EnvMap env =
      BuildWorkerEnv(JobEnv{}, PyTorchGroupInfo{}, 0,
                     {{"DISTJOB_RDZV_TOKEN", "secret"},
                      {"DISTJOB_RDZV_TOKEN_FILE", "/etc/distjob/rdzv/token"}},
                     {});
  EXPECT_EQ(env.count("DISTJOB_RDZV_TOKEN"), 0u);
  // A path is not the secret: a worker may show where it came from.
  EXPECT_EQ(env.at("DISTJOB_RDZV_TOKEN_FILE"), "/etc/distjob/rdzv/token");
}

TEST(WorkerEnvTest, EffectiveLaunchTakesTheOperatorLayoutWithoutMutating) {
  LaunchOptions launch;
  JobEnv job;
  job.pytorch_layout = true;
  job.nnodes = 3;
  job.node_rank = 1;
  job.master_addr = "j-master-0";
  job.master_port = 23456;
  const LaunchOptions effective = EffectiveLaunch(job, launch);
  EXPECT_EQ(effective.max_nodes, 3);
  EXPECT_EQ(effective.node_rank, 1);
  EXPECT_EQ(effective.master_addr, "j-master-0");
  EXPECT_EQ(launch.max_nodes, 1);
  EXPECT_EQ(EffectiveLaunch(JobEnv{}, launch).master_addr, "127.0.0.1");
}

}  // namespace
}  // namespace distjob
