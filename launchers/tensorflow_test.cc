#include "launchers/tensorflow.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distjob {
namespace {

Cluster Make(
    PeerSource source,
    std::vector<std::pair<std::string, std::vector<std::string>>> tasks) {
  Cluster c;
  c.source = source;
  for (auto& [task, hosts] : tasks) c.tasks.push_back({task, hosts, "test"});
  std::sort(
      c.tasks.begin(), c.tasks.end(),
      [](const TaskPeers& a, const TaskPeers& b) { return a.task < b.task; });
  return c;
}

std::string TfConfig(const Identity& id, const Cluster& c,
                     const TensorFlowOptions& o = {}, const EnvMap& env = {}) {
  auto out = TensorFlowEnv(id, c, o, env);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok() || !out->vars.count("TF_CONFIG")) return "<none>";
  return out->vars.at("TF_CONFIG");
}

// Volcano's tensorflow-dist-mnist: ps x1, worker x2, port 2222, every pod.
TEST(TensorFlowEnvTest, VolcanoSeedJobFromEveryPod) {
  const Cluster c = Make(PeerSource::kVolcano,
                         {{"ps", {"tf-ps-0.tf"}},
                          {"worker", {"tf-worker-0.tf", "tf-worker-1.tf"}}});
  const std::string cluster =
      "{\"cluster\":{\"ps\":[\"tf-ps-0.tf:2222\"],\"worker\":[\"tf-worker-0."
      "tf:2222\",\"tf-worker-1.tf:2222\"]},";
  struct Case {
    Identity id;
    std::string task;
  } cases[] = {
      {{"tf", "ps", 0}, "\"task\":{\"type\":\"ps\",\"index\":0}}"},
      {{"tf", "worker", 0}, "\"task\":{\"type\":\"worker\",\"index\":0}}"},
      {{"tf", "worker", 1}, "\"task\":{\"type\":\"worker\",\"index\":1}}"},
  };
  for (const Case& k : cases) {
    EXPECT_EQ(TfConfig(k.id, c), cluster + k.task);
  }
}

// Volcano's tensorflow plugin's own test vector.
TEST(TensorFlowEnvTest, VolcanoChiefWorkerPsOrder) {
  const Cluster c =
      Make(PeerSource::kVolcano,
           {{"chief", {"tfj-chief-0.tfj"}},
            {"ps", {"tfj-ps-0.tfj"}},
            {"worker", {"tfj-worker-0.tfj", "tfj-worker-1.tfj"}}});
  EXPECT_EQ(TfConfig({"tfj", "worker", 1}, c),
            "{\"cluster\":{\"ps\":[\"tfj-ps-0.tfj:2222\"],\"worker\":[\"tfj-"
            "worker-0.tfj:2222\",\"tfj-worker-1.tfj:2222\"],\"chief\":[\"tfj-"
            "chief-0.tfj:2222\"]},\"task\":{\"type\":\"worker\",\"index\":1}}");
}

TEST(TensorFlowEnvTest, ChiefWorkersPsEvaluatorAndExclusion) {
  const Cluster c = Make(PeerSource::kVolcano,
                         {{"chief", {"j-chief-0.j"}},
                          {"ps", {"j-ps-0.j"}},
                          {"evaluator", {"j-evaluator-0.j"}},
                          {"worker", {"j-worker-0.j", "j-worker-1.j"}}});
  const std::string with = TfConfig({"j", "evaluator", 0}, c);
  EXPECT_EQ(with,
            "{\"cluster\":{\"ps\":[\"j-ps-0.j:2222\"],\"worker\":[\"j-worker-"
            "0.j:2222\",\"j-worker-1.j:2222\"],\"chief\":[\"j-chief-0.j:2222\"]"
            ",\"evaluator\":[\"j-evaluator-0.j:2222\"]},\"task\":{\"type\":"
            "\"evaluator\",\"index\":0}}");
  TensorFlowOptions no_eval;
  no_eval.include_evaluator = false;
  const std::string without = TfConfig({"j", "chief", 0}, c, no_eval);
  EXPECT_EQ(without.find("evaluator"), std::string::npos) << without;
  EXPECT_NE(without.find("\"type\":\"chief\""), std::string::npos);
}

TEST(TensorFlowEnvTest, DashedTaskNamesViaRoles) {
  const Cluster c =
      Make(PeerSource::kVolcano,
           {{"ps-server", {"j-ps-server-0.j"}},
            {"trainer-a", {"j-trainer-a-0.j", "j-trainer-a-1.j"}}});
  TensorFlowOptions o;
  ASSERT_TRUE(ParseTfRoles("ps=ps-server,worker=trainer-a", &o.roles).ok());
  EXPECT_EQ(
      TfConfig({"j", "trainer-a", 1}, c, o),
      "{\"cluster\":{\"ps\":[\"j-ps-server-0.j:2222\"],\"worker\":[\"j-"
      "trainer-a-0.j:2222\",\"j-trainer-a-1.j:2222\"]},\"task\":{\"type\":"
      "\"worker\",\"index\":1}}");
  EXPECT_FALSE(ParseTfRoles("boss=x", &o.roles).ok());
  EXPECT_FALSE(ParseTfRoles("ps=", &o.roles).ok());
}

TEST(TensorFlowEnvTest, StandaloneGetsNone) {
  const Cluster c = Make(PeerSource::kVolcano, {{"worker", {"j-worker-0.j"}}});
  EXPECT_EQ(TfConfig({"j", "worker", 0}, c), "<none>");
}

TEST(TensorFlowEnvTest, KubeflowShortAndServiceForms) {
  auto svc = KubeflowPeers("tfj", "chief=1,worker=2,ps=1", "ns", "");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ(TfConfig({"tfj", "worker", 1}, *svc),
            "{\"cluster\":{\"chief\":[\"tfj-chief-0.ns.svc:2222\"],\"ps\":["
            "\"tfj-ps-0.ns.svc:2222\"],\"worker\":[\"tfj-worker-0.ns.svc:2222\""
            ",\"tfj-worker-1.ns.svc:2222\"]},\"task\":{\"type\":\"worker\","
            "\"index\":1},\"environment\":\"cloud\"}");
  auto dom = KubeflowPeers("tfj", "worker=2", "ns", "cluster.local");
  ASSERT_TRUE(dom.ok());
  EXPECT_NE(TfConfig({"tfj", "worker", 0}, *dom)
                .find("tfj-worker-1.ns.svc.cluster.local:2222"),
            std::string::npos);
  auto short_form = KubeflowPeers("tfj", "master=1,worker=1", "", "");
  ASSERT_TRUE(short_form.ok());
  EXPECT_EQ(TfConfig({"tfj", "master", 0}, *short_form),
            "{\"cluster\":{\"master\":[\"tfj-master-0:2222\"],\"worker\":["
            "\"tfj-worker-0:2222\"]},\"task\":{\"type\":\"master\",\"index\":0}"
            ",\"environment\":\"cloud\"}");
}

TEST(TensorFlowEnvTest, VolcanoMasterActsAsChief) {
  const Cluster c = Make(PeerSource::kVolcano,
                         {{"master", {"j-master-0.j"}}, {"worker", {"w0"}}});
  EXPECT_EQ(TfConfig({"j", "master", 0}, c),
            "{\"cluster\":{\"worker\":[\"w0:2222\"],\"chief\":[\"j-master-0.j:"
            "2222\"]},\"task\":{\"type\":\"chief\",\"index\":0}}");
}

TEST(TensorFlowEnvTest, PortAndIpv6) {
  const Cluster c =
      Make(PeerSource::kStatic, {{"worker", {"::1", "10.0.0.2"}}});
  TensorFlowOptions o;
  o.port = 3333;
  EXPECT_EQ(TfConfig({"j", "worker", 0}, c, o),
            "{\"cluster\":{\"worker\":[\"[::1]:3333\",\"10.0.0.2:3333\"]},"
            "\"task\":{\"type\":\"worker\",\"index\":0}}");
}

TEST(TensorFlowEnvTest, ExistingConfigKeptOrOverriddenAndValidated) {
  const Cluster c = Make(PeerSource::kVolcano, {{"worker", {"a", "b"}}});
  const EnvMap env = {{"TF_CONFIG", "{\"cluster\":{}}"}};
  EXPECT_EQ(TfConfig({"j", "worker", 0}, c, {}, env), "<none>");
  TensorFlowOptions o;
  o.override_existing = true;
  EXPECT_NE(TfConfig({"j", "worker", 0}, c, o, env), "<none>");
  auto garbage = TensorFlowEnv({"j", "worker", 0}, c, {},
                               {{"TF_CONFIG", "{cluster: nope"}});
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("TF_CONFIG"), std::string::npos);
}

}  // namespace
}  // namespace distjob
