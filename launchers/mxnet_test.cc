#include "launchers/mxnet.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

Cluster Mx(int schedulers, int servers, int workers) {
  std::string spec;
  auto add = [&spec](const char* t, int n) {
    if (n > 0)
      spec +=
          std::string(spec.empty() ? "" : ",") + t + "=" + std::to_string(n);
  };
  add("scheduler", schedulers);
  add("server", servers);
  add("worker", workers);
  auto c = KubeflowPeers("mx", spec, "", "");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Kubeflow's MXJob example: job mx, scheduler 1, server 2, worker 3.
TEST(MXNetEnvTest, KubeflowExampleWorker1) {
  auto out = MXNetEnv({"mx", "worker", 1}, Mx(1, 2, 3), {});
  ASSERT_TRUE(out.ok()) << out.status();
  const auto& v = out->vars;
  EXPECT_EQ(v.at("DMLC_ROLE"), "worker");
  EXPECT_EQ(v.at("DMLC_PS_ROOT_URI"), "mx-scheduler-0");
  EXPECT_EQ(v.at("DMLC_PS_ROOT_PORT"), "9091");
  EXPECT_EQ(v.at("DMLC_NUM_SERVER"), "2");
  EXPECT_EQ(v.at("DMLC_NUM_WORKER"), "3");
  EXPECT_EQ(v.at("DMLC_USE_KUBERNETES"), "1");
  EXPECT_EQ(v.at("DMLC_WORKER_ID"), "1");
  EXPECT_EQ(
      v.at("MX_CONFIG"),
      "{\"cluster\":{\"scheduler\":[{\"url\":\"mx-scheduler-0\",\"port\":9091}"
      "],\"server\":[{\"url\":\"mx-server-0\",\"port\":9091},{\"url\":\"mx-"
      "server-1\",\"port\":9091}],\"worker\":[{\"url\":\"mx-worker-0\","
      "\"port\":9091},{\"url\":\"mx-worker-1\",\"port\":9091},{\"url\":\"mx-"
      "worker-2\",\"port\":9091}]},\"labels\":{\"scheduler\":\"\",\"server\":"
      "\"\",\"worker\":\"\"},\"task\":{\"type\":\"worker\",\"index\":1}}");
}

TEST(MXNetEnvTest, SchedulerAndServerHaveNoWorkerId) {
  for (const char* task : {"scheduler", "server"}) {
    auto out = MXNetEnv({"mx", task, 0}, Mx(1, 2, 3), {});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->vars.at("DMLC_ROLE"), task);
    EXPECT_EQ(out->vars.count("DMLC_WORKER_ID"), 0u);
  }
}

TEST(MXNetEnvTest, LocalModeSetsNothing) {
  auto out = MXNetEnv({"mx", "worker", 0}, Mx(0, 0, 1), {});
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->vars.empty());
}

TEST(MXNetEnvTest, InvalidLayoutsAreErrors) {
  struct Case {
    int sch, srv, wrk;
  } cases[] = {{0, 0, 2}, {2, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, 1, 1}};
  for (const Case& k : cases) {
    auto out = MXNetEnv({"mx", "worker", 0}, Mx(k.sch, k.srv, k.wrk), {});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument)
        << k.sch << k.srv << k.wrk;
  }
  auto odd =
      KubeflowPeers("mx", "scheduler=1,server=1,worker=1,tuner=1", "", "");
  EXPECT_FALSE(MXNetEnv({"mx", "worker", 0}, *odd, {}).ok());
}

}  // namespace
}  // namespace distjob
