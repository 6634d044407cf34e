#include "discovery/identity.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

Cluster Tasks(const char* replicas) {
  return *KubeflowPeers("j", replicas, "", "");
}

TEST(ResolveIdentityTest, HostnameSplitAgainstDashedTaskNames) {
  Cluster c = Tasks("ps-server=1,trainer-a=3");
  IdentityInputs in;
  in.hostname = "my-job-trainer-a-2.my-job";
  auto r = ResolveIdentity(in, {}, c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id.job, "my-job");
  EXPECT_EQ(r->id.task, "trainer-a");
  EXPECT_EQ(r->id.index, 2);
  EXPECT_EQ(r->sources.at("task"), "hostname");
}

TEST(ResolveIdentityTest, FlagsThenVolcanoEnvThenHostname) {
  Cluster c = Tasks("worker=4");
  IdentityInputs in;
  in.hostname = "j-worker-1";
  auto env = ResolveIdentity(in, {{"VC_TASK_INDEX", "3"}}, c);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->id.index, 3);
  EXPECT_EQ(env->sources.at("index"), "env VC_TASK_INDEX");
  auto vk = ResolveIdentity(in, {{"VK_TASK_INDEX", "2"}}, c);
  EXPECT_EQ(vk->id.index, 2);
  in.index = 0;
  auto flag = ResolveIdentity(in, {{"VC_TASK_INDEX", "3"}}, c);
  EXPECT_EQ(flag->id.index, 0);
  EXPECT_EQ(flag->sources.at("index"), "flag --task-index");
  IdentityInputs all;
  all.job = "x";
  all.task = "worker";
  all.index = 1;
  all.hostname = "whatever";
  EXPECT_TRUE(ResolveIdentity(all, {}, c).ok());
}

TEST(ResolveIdentityTest, KubeflowRuleWithoutKnownTasks) {
  IdentityInputs in;
  in.hostname = "my-tf-job-worker-0";
  auto r = ResolveIdentity(in, {}, Cluster{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->id.job, "my-tf-job");
  EXPECT_EQ(r->id.task, "worker");
}

TEST(ResolveIdentityTest, ErrorsSayWhatWasFound) {
  Cluster c = Tasks("worker=2,a-worker=1");
  IdentityInputs noindex;
  noindex.hostname = "j-worker";
  auto r1 = ResolveIdentity(noindex, {}, c);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("j-worker"), std::string::npos);
  EXPECT_NE(r1.status().message().find("--task-index"), std::string::npos);

  IdentityInputs ambiguous;
  ambiguous.hostname = "j-a-worker-0";
  auto r2 = ResolveIdentity(ambiguous, {}, c);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("several"), std::string::npos);
  ambiguous.job = "j";
  auto r2b = ResolveIdentity(ambiguous, {}, c);
  ASSERT_TRUE(r2b.ok());
  EXPECT_EQ(r2b->id.task, "a-worker");

  IdentityInputs beyond;
  beyond.hostname = "j-worker-5";
  auto r3 = ResolveIdentity(beyond, {}, c);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("beyond"), std::string::npos);

  IdentityInputs bad_env;
  bad_env.hostname = "j-worker-0";
  EXPECT_FALSE(ResolveIdentity(bad_env, {{"VC_TASK_INDEX", "-1"}}, c).ok());
  IdentityInputs unknown;
  unknown.hostname = "j-ps-0";
  EXPECT_FALSE(ResolveIdentity(unknown, {}, c).ok());
  IdentityInputs huge;
  huge.hostname = "j-worker-99999999999999999999";
  EXPECT_FALSE(ResolveIdentity(huge, {}, c).ok());
}

}  // namespace
}  // namespace distjob
