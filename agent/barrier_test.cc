#include "agent/barrier.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "common/net.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

JobEnv TfJob(const std::string& task, int index) {
  JobEnv job;
  job.framework = "tensorflow";
  job.has_identity = true;
  job.identity.id = {"mnist", task, index};
  job.cluster.source = PeerSource::kVolcano;
  job.cluster.tasks = {{"ps", {"127.0.0.1"}, "file"},
                       {"worker", {"127.0.0.2", "127.0.0.3"}, "file"}};
  return job;
}

TEST(PlanBarrierTest, VolcanoTensorFlowJobIsHostedByPsZero) {
  RunOptions options;
  options.discovery.barrier_port = 1234;
  for (const auto& [task, index] :
       std::vector<std::pair<std::string, int>>{{"ps", 0}, {"worker", 1}}) {
    BarrierPlan plan = PlanBarrier(TfJob(task, index), options);
    ASSERT_TRUE(plan.run) << plan.skip_reason;
    EXPECT_EQ(plan.run_id, "mnist");
    EXPECT_EQ(plan.host_pod, "ps-0");
    EXPECT_EQ(plan.endpoint.ToString(), "127.0.0.1:1234");
    EXPECT_EQ(plan.is_host, task == "ps");
    EXPECT_EQ(plan.self, task + "-" + std::to_string(index));
    EXPECT_EQ(plan.pods,
              (std::vector<std::string>{"ps-0", "worker-0", "worker-1"}));
  }
}

TEST(PlanBarrierTest, ChiefComesBeforePsAndSchedulerBeforeOthers) {
  RunOptions options;
  JobEnv job = TfJob("worker", 0);
  job.cluster.tasks.insert(job.cluster.tasks.begin(),
                           {"chief", {"c0"}, "file"});
  EXPECT_EQ(PlanBarrier(job, options).host_pod, "chief-0");
  EXPECT_EQ(PlanBarrier(job, options).endpoint.host, "c0");

  job.framework = "mxnet";
  job.cluster.tasks = {{"scheduler", {"s0"}, "f"},
                       {"server", {"v0"}, "f"},
                       {"worker", {"w0"}, "f"}};
  EXPECT_EQ(PlanBarrier(job, options).host_pod, "scheduler-0");

  // No known first role: the first task (by name) hosts.
  job.framework = "none";
  job.cluster.tasks = {{"alpha", {"a0", "a1"}, "f"}, {"beta", {"b0"}, "f"}};
  job.identity.id = {"j", "alpha", 1};
  BarrierPlan plan = PlanBarrier(job, options);
  EXPECT_EQ(plan.host_pod, "alpha-0");
  EXPECT_FALSE(plan.is_host);
  EXPECT_EQ(plan.endpoint.ToString(), "a0:29401");
}

TEST(PlanBarrierTest, Ipv6HostIsBracketed) {
  RunOptions options;
  JobEnv job = TfJob("worker", 0);
  job.cluster.tasks[0].hosts = {"fd00::1"};
  EXPECT_EQ(PlanBarrier(job, options).endpoint.ToString(), "[fd00::1]:29401");
}

TEST(PlanBarrierTest, SkippedWhereSomethingElseGathersTheNodes) {
  RunOptions options;
  options.discovery.no_barrier = true;
  EXPECT_FALSE(PlanBarrier(TfJob("ps", 0), options).run);

  options = RunOptions();
  JobEnv pytorch = TfJob("worker", 0);
  pytorch.framework = "pytorch";
  EXPECT_FALSE(PlanBarrier(pytorch, options).run);

  options.launch.rdzv_backend = RdzvBackend::kC10d;
  EXPECT_FALSE(PlanBarrier(TfJob("ps", 0), options).run);

  options = RunOptions();
  JobEnv one = TfJob("ps", 0);
  one.cluster.tasks.resize(1);
  EXPECT_FALSE(PlanBarrier(one, options).run);

  JobEnv none;
  EXPECT_FALSE(PlanBarrier(none, options).run);
}

TEST(MissingPodsTest, ListsThoseNotSeenInClusterOrder) {
  RunOptions options;
  BarrierPlan plan = PlanBarrier(TfJob("ps", 0), options);
  EXPECT_EQ(MissingPods(plan, {"worker-0", "ps-0"}),
            std::vector<std::string>{"worker-1"});
  EXPECT_EQ(MissingPods(plan, {}), plan.pods);
}

TEST(StoppedBarrierMessageTest, HostStoppedBeforeAnyPodArrivedSaysSo) {
  RunOptions options;
  options.discovery.barrier_port = 1234;
  const BarrierPlan host = PlanBarrier(TfJob("ps", 0), options);
  ASSERT_TRUE(host.is_host);
  EXPECT_EQ(StoppedBarrierMessage(host, {}),
            "stopped while waiting for the start barrier of job 'mnist' (no "
            "pod had arrived yet at the store hosted here, 127.0.0.1:1234)");
  // Elsewhere an empty listing still means the host was not reached, and
  // once pods arrived the message names the missing ones either way.
  const BarrierPlan worker = PlanBarrier(TfJob("worker", 1), options);
  EXPECT_EQ(StoppedBarrierMessage(worker, {}),
            "stopped while waiting for the start barrier of job 'mnist' (the "
            "store at 127.0.0.1:1234, hosted by ps-0, not reached)");
  EXPECT_EQ(StoppedBarrierMessage(host, {"ps-0"}),
            "stopped while waiting for the start barrier of job 'mnist' (1/3 "
            "pods arrived; missing: worker-0, worker-1)");
}

// A free loopback port: the project's own helper, asserted here.
int FreePort() {
  auto port = FindFreePort("127.0.0.1");
  EXPECT_TRUE(port.ok()) << port.status();
  return port.ok() ? *port : 0;
}

BarrierPlan LoopbackPlan(const std::string& task, int index, int port,
                         absl::Duration timeout) {
  RunOptions options;
  options.discovery.barrier_port = port;
  options.discovery.barrier_timeout = timeout;
  JobEnv job = TfJob(task, index);
  job.cluster.tasks = {{"ps", {"127.0.0.1"}, "f"},
                       {"worker", {"127.0.0.1", "127.0.0.1"}, "f"}};
  return PlanBarrier(job, options);
}

TEST(RunBarrierTest, ReturnsOnceEveryPodArrived) {
  const int port = FreePort();
  absl::Status results[3];
  std::thread ps([&] {
    results[0] = RunBarrier(LoopbackPlan("ps", 0, port, absl::Seconds(30)));
  });
  std::thread w0([&] {
    results[1] = RunBarrier(LoopbackPlan("worker", 0, port, absl::Seconds(30)));
  });
  std::thread w1([&] {
    results[2] = RunBarrier(LoopbackPlan("worker", 1, port, absl::Seconds(30)));
  });
  ps.join();
  w0.join();
  w1.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

TEST(RunBarrierTest, TimeoutNamesTheMissingPod) {
  const int port = FreePort();
  absl::Status results[2];
  std::thread ps([&] {
    results[0] = RunBarrier(LoopbackPlan("ps", 0, port, absl::Seconds(3)));
  });
  std::thread w0([&] {
    results[1] = RunBarrier(LoopbackPlan("worker", 0, port, absl::Seconds(3)));
  });
  ps.join();
  w0.join();
  for (const absl::Status& s : results) {
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find("missing: worker-1"), std::string::npos) << s;
  }
}

TEST(RunBarrierTest, UnreachableHostIsNamed) {
  absl::Status s =
      RunBarrier(LoopbackPlan("worker", 0, FreePort(), absl::Seconds(2)));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing: ps-0"), std::string::npos) << s;
}

TEST(RunBarrierTest, CancelEndsTheWait) {
  const int port = FreePort();
  for (const auto& [task, index] :
       std::vector<std::pair<std::string, int>>{{"ps", 0}, {"worker", 0}}) {
    const absl::Time start = absl::Now();
    absl::Status s =
        RunBarrier(LoopbackPlan(task, index, port, absl::Seconds(120)),
                   [start] { return absl::Now() > start + absl::Seconds(1); });
    EXPECT_TRUE(absl::IsCancelled(s)) << task << ": " << s;
    EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << task;
  }
}

}  // namespace
}  // namespace distjob
