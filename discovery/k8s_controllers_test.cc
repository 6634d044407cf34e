#include "discovery/k8s_controllers.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

// Fixtures pin what each controller injects; where each convention comes
// from is said at each one (tests/manifests/operators.py simulates the
// same for whole manifests).

ControllerLayout Detect(const ControllerInputs& in, const EnvMap& env) {
  auto l = DetectController(in, env);
  EXPECT_TRUE(l.ok()) << l.status();
  if (!l.ok() || !l->has_value()) return {};
  return **l;
}

std::string Error(const ControllerInputs& in, const EnvMap& env) {
  auto l = DetectController(in, env);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(l.status().message());
}

TEST(K8sControllersTest, NothingWithoutAControllersVariables) {
  ControllerInputs in;
  in.hostname = "train-0";
  auto l = DetectController(in, {{"PET_NNODES", "2"}});
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->has_value());
}

// LeaderWorkerSet sets LWS_LEADER_ADDRESS (<lws>-<group>.<lws>.<ns>),
// LWS_GROUP_SIZE and LWS_WORKER_INDEX (0: the leader) in every container.
TEST(K8sControllersTest, LeaderWorkerSetGivesAStaticLayoutOnTheLeader) {
  ControllerInputs in;
  in.hostname = "train-0-2";
  const ControllerLayout l =
      Detect(in, {{"LWS_LEADER_ADDRESS", "train-0.train.default"},
                  {"LWS_GROUP_SIZE", "4"},
                  {"LWS_WORKER_INDEX", "2"}});
  EXPECT_EQ(l.controller, "lws");
  EXPECT_TRUE(l.fixed);
  EXPECT_EQ(l.node_rank, 2);
  EXPECT_EQ(l.nnodes, 4);
  EXPECT_EQ(l.master_addr, "train-0.train.default");
  EXPECT_EQ(l.pod_index, "2");
  EXPECT_EQ(l.rank_source, "env LWS_WORKER_INDEX (LeaderWorkerSet)");
}

TEST(K8sControllersTest, LeaderWorkerSetContradictionsNameBothInputs) {
  ControllerInputs in;
  const std::string beyond = Error(in, {{"LWS_LEADER_ADDRESS", "l"},
                                        {"LWS_GROUP_SIZE", "2"},
                                        {"LWS_WORKER_INDEX", "2"}});

  EXPECT_NE(beyond.find("LWS_WORKER_INDEX=2"), std::string::npos) << beyond;
  EXPECT_NE(beyond.find("LWS_GROUP_SIZE=2"), std::string::npos) << beyond;
  const std::string partial = Error(in, {{"LWS_GROUP_SIZE", "2"}});
  EXPECT_NE(partial.find("env LWS_LEADER_ADDRESS and LWS_WORKER_INDEX are "
                         "missing while LWS_GROUP_SIZE is set"),
            std::string::npos)
      << partial;
  const std::string index_only = Error(in, {{"LWS_WORKER_INDEX", "1"}});
  EXPECT_NE(index_only.find("env LWS_LEADER_ADDRESS and LWS_GROUP_SIZE are "
                            "missing while LWS_WORKER_INDEX is set"),
            std::string::npos)
      << index_only;
  in.nnodes = 3;
  const std::string flag = Error(in, {{"LWS_LEADER_ADDRESS", "l"},
                                      {"LWS_GROUP_SIZE", "2"},
                                      {"LWS_WORKER_INDEX", "0"}});
  EXPECT_NE(flag.find("--nnodes 3"), std::string::npos) << flag;
}

TEST(K8sControllersTest, UserLayoutKeepsOnlyThePodIndex) {
  ControllerInputs in;
  in.layout_given = true;
  const ControllerLayout l = Detect(in, {{"LWS_LEADER_ADDRESS", "l"},
                                         {"LWS_GROUP_SIZE", "2"},
                                         {"LWS_WORKER_INDEX", "1"}});
  EXPECT_FALSE(l.fixed);
  EXPECT_EQ(l.pod_index, "1");
}

// The Job controller names an Indexed Job's pods <job>-<index> and sets
// JOB_COMPLETION_INDEX; with spec.subdomain they resolve as
// <job>-<index>.<subdomain>.
TEST(K8sControllersTest, IndexedJobNeedsNnodesForALayout) {
  ControllerInputs in;
  in.hostname = "train-1.workers.ns.svc.cluster.local";
  ControllerLayout l = Detect(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_EQ(l.controller, "indexed-job");
  EXPECT_FALSE(l.fixed);
  EXPECT_EQ(l.pod_index, "1");
  in.nnodes = 3;
  l = Detect(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_TRUE(l.fixed);
  EXPECT_EQ(l.node_rank, 1);
  EXPECT_EQ(l.nnodes, 3);
  EXPECT_EQ(l.master_addr, "train-0.workers");
}

TEST(K8sControllersTest, JobSetPodWithoutLabelsIsNotTakenForAnIndexedJob) {
  ControllerInputs in;
  in.hostname = "js-workers-1-0.js";
  in.nnodes = 4;
  const std::string e = Error(in, {{"JOB_COMPLETION_INDEX", "0"}});
  EXPECT_NE(e.find("JobSet"), std::string::npos) << e;
  EXPECT_NE(e.find("--replicated-job"), std::string::npos) << e;
  // A Job whose name ends in a number, under its own Service, is not one.
  in.hostname = "train-1-0.train-1";
  const ControllerLayout l = Detect(in, {{"JOB_COMPLETION_INDEX", "0"}});
  EXPECT_TRUE(l.fixed);
  EXPECT_EQ(l.master_addr, "train-1-0.train-1");
}

TEST(K8sControllersTest, IndexedJobContradictionsNameBothInputs) {
  ControllerInputs in;
  in.hostname = "train-2.workers";
  in.nnodes = 2;
  std::string e = Error(in, {{"JOB_COMPLETION_INDEX", "2"}});
  EXPECT_NE(e.find("JOB_COMPLETION_INDEX=2"), std::string::npos) << e;
  EXPECT_NE(e.find("--nnodes 2"), std::string::npos) << e;
  e = Error(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_NE(e.find("hostname 'train-2.workers'"), std::string::npos) << e;
  EXPECT_NE(e.find("JOB_COMPLETION_INDEX=1"), std::string::npos) << e;
  in.hostname = "train-1";
  e = Error(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_NE(e.find("subdomain"), std::string::npos) << e;
}

// JobSet (sigs.k8s.io/jobset): hostname
// <jobset>-<replicatedjob>-<jobIndex>-<podIndex>, subdomain = the JobSet's
// name, the jobset.sigs.k8s.io/* labels on every pod, JOB_COMPLETION_INDEX
// from the Indexed Job underneath.
std::map<std::string, std::string> JobSetLabels(const std::string& job_index,
                                                const std::string& global) {
  return {{kJobSetNameLabel, "pt"},           {kReplicatedJobLabel, "node"},
          {kJobIndexLabel, job_index},        {kJobGlobalIndexLabel, global},
          {kReplicatedJobReplicasLabel, "2"}, {kGlobalReplicasLabel, "2"}};
}

TEST(K8sControllersTest, JobSetOnePodPerJobNeedsNoFlags) {
  ControllerInputs in;
  in.hostname = "pt-node-1-0";
  in.labels = JobSetLabels("1", "1");
  in.labels_origin = "file /etc/podinfo/labels";
  const ControllerLayout l = Detect(in, {{"JOB_COMPLETION_INDEX", "0"}});
  EXPECT_EQ(l.controller, "jobset");
  EXPECT_TRUE(l.fixed);
  EXPECT_EQ(l.node_rank, 1);
  EXPECT_EQ(l.nnodes, 2);
  EXPECT_EQ(l.master_addr, "pt-node-0-0.pt");
  EXPECT_EQ(l.pod_index, "1.0");
  EXPECT_EQ(l.size_source,
            "label jobset.sigs.k8s.io/global-replicas (file "
            "/etc/podinfo/labels) (one pod per Job)");
}

TEST(K8sControllersTest, JobSetSeveralPodsPerJobWithNnodes) {
  ControllerInputs in;
  in.hostname = "my-set-node-1-2";
  in.replicated_job = "node";  // no labels: the flag splits the hostname
  in.nnodes = 4;
  auto l = DetectController(in, {{"JOB_COMPLETION_INDEX", "2"}});
  // Job 1 without the global replica count cannot be placed.
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  in.labels = {{kJobGlobalIndexLabel, "1"}, {kGlobalReplicasLabel, "2"}};
  in.labels_origin = "f";
  in.hostname = "my-set-node-1-1";
  const ControllerLayout ok = Detect(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_EQ(ok.node_rank, 3);  // 2 pods per job: 1 * 2 + 1
  EXPECT_EQ(ok.nnodes, 4);
  EXPECT_EQ(ok.master_addr, "my-set-node-0-0.my-set");
}

// With hostNetwork: true a pod's hostname is its node's. Where the layout
// is the user's (--rdzv-backend c10d --rdzv-endpoint ...), the controller's
// naming only checks the pod index: a mismatch warns instead of failing.
TEST(K8sControllersTest, NodeHostnameWarnsWhenTheLayoutIsTheUsers) {
  ControllerInputs in;
  in.hostname = "ip-10-0-3-7.ec2.internal";
  in.nnodes = 4;
  in.layout_given = true;
  ControllerLayout l = Detect(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_EQ(l.controller, "indexed-job");
  EXPECT_FALSE(l.fixed);
  EXPECT_EQ(l.pod_index, "1");
  EXPECT_NE(l.warning.find("hostname 'ip-10-0-3-7.ec2.internal'"),
            std::string::npos)
      << l.warning;
  in.hostname = "gke-pool-1-a1b2c3";
  l = Detect(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_EQ(l.pod_index, "1");
  EXPECT_NE(l.warning.find("<job>-<index>"), std::string::npos) << l.warning;
  // The controller's layout is derived from the hostname: still an error.
  in.layout_given = false;
  const std::string e = Error(in, {{"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_NE(e.find("hostname 'gke-pool-1-a1b2c3'"), std::string::npos) << e;
}

TEST(K8sControllersTest,
     NodeHostnameDropsTheJobSetPodIndexWhenTheLayoutIsTheUsers) {
  ControllerInputs in;
  in.hostname = "ip-10-0-3-7";
  in.labels = JobSetLabels("1", "1");
  in.labels_origin = "file L";
  in.layout_given = true;
  const ControllerLayout l = Detect(in, {{"JOB_COMPLETION_INDEX", "0"}});
  EXPECT_EQ(l.controller, "jobset");
  EXPECT_FALSE(l.fixed);
  EXPECT_EQ(l.pod_index, "");
  EXPECT_NE(l.warning.find("hostname 'ip-10-0-3-7'"), std::string::npos)
      << l.warning;
  in.hostname = "pt-node-0-0";  // job index 0, the label says 1
  EXPECT_NE(Detect(in, {}).warning.find("job-index (file L)=1"),
            std::string::npos);
  in.layout_given = false;
  const std::string e = Error(in, {});
  EXPECT_NE(e.find("job-index (file L)=1"), std::string::npos) << e;
}

TEST(K8sControllersTest, JobSetContradictionsNameBothInputs) {
  ControllerInputs in;
  in.hostname = "pt-node-1-0";
  in.labels = JobSetLabels("0", "0");
  in.labels_origin = "file L";
  std::string e = Error(in, {});
  EXPECT_NE(e.find("hostname 'pt-node-1-0'"), std::string::npos) << e;
  EXPECT_NE(e.find("job-index (file L)=0"), std::string::npos) << e;
  in.labels = JobSetLabels("1", "1");
  in.labels[kJobSetNameLabel] = "other";
  e = Error(in, {});
  EXPECT_NE(e.find("jobset-name (file L)='other'"), std::string::npos) << e;
  in.labels = JobSetLabels("1", "1");
  e = Error(in, {{"JOB_COMPLETION_INDEX", "3"}});
  EXPECT_NE(e.find("JOB_COMPLETION_INDEX=3"), std::string::npos) << e;
  in.labels = JobSetLabels("2", "2");
  in.hostname = "pt-node-2-0";
  e = Error(in, {});
  EXPECT_NE(e.find("replicatedjob-replicas (file L)=2"), std::string::npos)
      << e;
}

// Kubeflow Trainer v2's torch plugin (a TrainJob on the torch-distributed
// runtime) sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (from the
// completion index), PET_MASTER_ADDR=<trainjob>-node-0-0.<trainjob> and
// PET_MASTER_PORT; the torchrun flags read them.
TEST(K8sControllersTest, TrainerV2IsCheckedNotReplaced) {
  ControllerInputs in;
  in.hostname = "tj-node-0-1";
  const EnvMap env = {
      {"PET_NNODES", "2"},          {"PET_NPROC_PER_NODE", "1"},
      {"PET_NODE_RANK", "1"},       {"PET_MASTER_ADDR", "tj-node-0-0.tj"},
      {"PET_MASTER_PORT", "29500"}, {"JOB_COMPLETION_INDEX", "1"}};
  const ControllerLayout l = Detect(in, env);
  EXPECT_EQ(l.controller, "trainer-v2");
  EXPECT_FALSE(l.fixed);
  EXPECT_EQ(l.pod_index, "1");
  EnvMap bad = env;
  bad["PET_NODE_RANK"] = "0";
  std::string e = Error(in, bad);
  EXPECT_NE(e.find("PET_NODE_RANK=0"), std::string::npos) << e;
  EXPECT_NE(e.find("JOB_COMPLETION_INDEX=1"), std::string::npos) << e;
  bad = env;
  bad["JOB_COMPLETION_INDEX"] = bad["PET_NODE_RANK"] = "2";
  e = Error(in, bad);
  EXPECT_NE(e.find("PET_NNODES=2"), std::string::npos) << e;
}

TEST(K8sControllersTest, DownwardApiLabelsFile) {
  auto l = ParseDownwardApiLabels(
      "jobset.sigs.k8s.io/job-index=\"1\"\napp=\"x\"\n", "f");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->at(kJobIndexLabel), "1");
  EXPECT_EQ(l->at("app"), "x");
  EXPECT_FALSE(ParseDownwardApiLabels("a=1\n", "f").ok());
  EXPECT_TRUE(ParseDownwardApiLabels("", "f")->empty());
}

}  // namespace
}  // namespace distjob
