#include "discovery/pytorch_operator.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

// Volcano's pytorch plugin example: job pj, master 1 + worker 3.
TEST(PyTorchOperatorTest, VolcanoRanks) {
  Cluster c;
  c.source = PeerSource::kVolcano;
  c.tasks = {
      {"master", {"pj-master-0.pj"}, "t"},
      {"worker", {"pj-worker-0.pj", "pj-worker-1.pj", "pj-worker-2.pj"}, "t"}};
  auto master = PyTorchOperatorNodes({"pj", "master", 0}, c);
  ASSERT_TRUE(master.ok());
  EXPECT_EQ(master->node_rank, 0);
  EXPECT_EQ(master->nnodes, 4);
  EXPECT_EQ(master->master_addr, "pj-master-0.pj");
  auto w2 = PyTorchOperatorNodes({"pj", "worker", 2}, c);
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(w2->node_rank, 3);
}

TEST(PyTorchOperatorTest, KubeflowNamesAndErrors) {
  auto c = KubeflowPeers("pt", "master=1,worker=2", "ns", "");
  auto w1 = PyTorchOperatorNodes({"pt", "worker", 1}, *c);
  ASSERT_TRUE(w1.ok());
  EXPECT_EQ(w1->master_addr, "pt-master-0.ns.svc");
  EXPECT_EQ(w1->node_rank, 2);
  auto no_master = KubeflowPeers("pt", "worker=2", "", "");
  EXPECT_FALSE(PyTorchOperatorNodes({"pt", "worker", 0}, *no_master).ok());
  auto two = KubeflowPeers("pt", "master=2", "", "");
  EXPECT_FALSE(PyTorchOperatorNodes({"pt", "master", 0}, *two).ok());
  EXPECT_FALSE(PyTorchOperatorNodes({"pt", "tensorboard", 0}, *c).ok());
}

}  // namespace
}  // namespace distjob
