#include "agent/cli/run_flags.h"

#include <csignal>
#include <cstdio>
#include <string>

#include "common/environment.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(RunFlagsTest, TorchrunDefaults) {
  auto o = ParseRunOptions({"train.py"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launch.nproc, 1);
  EXPECT_EQ(o->launch.min_nodes, 1);
  EXPECT_EQ(o->launch.max_nodes, 1);
  EXPECT_EQ(o->launch.rdzv_backend, RdzvBackend::kStatic);
  EXPECT_EQ(o->launch.rdzv_id, "none");
  EXPECT_EQ(o->launch.max_restarts, 0);
  EXPECT_EQ(o->launch.master_port, 29500);
  EXPECT_EQ(o->launch.role, "default");
  EXPECT_EQ(o->supervisor.shutdown_timeout, absl::Seconds(25));
  EXPECT_EQ(o->supervisor.stop_signals,
            (std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT}));
  EXPECT_EQ(o->command, std::vector<std::string>{"train.py"});
}

TEST(RunFlagsTest, TheInvocationIsPartOfTheOptionsAsParsed) {
  auto plain = ParseRunOptions({"train.py"}, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->launch.as_torchrun);
  EXPECT_EQ(plain->launch.rdzv_key_suffix, "");
  auto o = ParseRunOptions({"train.py"}, {}, Invocation{true, "-inner"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->launch.as_torchrun);
  EXPECT_EQ(o->launch.rdzv_key_suffix, "-inner");
}

TEST(RunFlagsTest, StandaloneFromEnvEvenWhenEmptyOverridesRendezvous) {
  auto o =
      ParseRunOptions({"--rdzv-endpoint", "far:1", "--nnodes", "2", "x"},
                      {{"PET_STANDALONE", ""}, {"PET_NPROC_PER_NODE", "3"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->launch.standalone);
  EXPECT_EQ(o->launch.nproc, 3);
  EXPECT_EQ(o->launch.rdzv_backend, RdzvBackend::kC10d);
  EXPECT_EQ(o->launch.rdzv_endpoint, "localhost:0");
  EXPECT_EQ(o->launch.max_nodes, 1);
}

TEST(RunFlagsTest, RoleIsShortPrintableAscii) {
  const std::string longest(kMaxRoleBytes, 'r');
  auto o = ParseRunOptions({"--role", longest, "x"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launch.role, longest);
  for (const std::string& role :
       {longest + "r", std::string(""), std::string("a b"),
        std::string("a\x1b[2J"), std::string("tr\xc3\xa4ner"),
        std::string("a\nb")}) {
    auto bad = ParseRunOptions({"--role", role, "x"}, {});
    ASSERT_FALSE(bad.ok()) << role;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message().rfind("--role ", 0), 0u) << bad.status();
    EXPECT_EQ(bad.status().message().find('\n'), std::string::npos);
  }
}

// Found at start, naming the file, rather than as handshakes failing until
// the join timeout.
TEST(RunFlagsTest, EtcdTlsFilesThatDoNotLoadAreRefused) {
  const std::string junk = std::string(::testing::TempDir()) + "/junk.pem";
  FILE* f = std::fopen(junk.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("not a certificate\n", f);
  std::fclose(f);
  for (const std::string& conf :
       {"ca_cert=" + junk, "cert=" + junk + ",key=" + junk,
        "ca_cert=" + junk + ".missing"}) {
    auto o = ParseRunOptions({"--rdzv-backend", "etcd", "--rdzv-endpoint",
                              "localhost:2379", "--rdzv-conf", conf, "x"},
                             {});
    ASSERT_FALSE(o.ok()) << conf;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find("--rdzv-conf "), std::string::npos)
        << o.status();
    EXPECT_NE(o.status().message().find(junk), std::string::npos) << o.status();
  }
}

TEST(RunFlagsTest, NprocSpellingsAndValues) {
  auto underscore = ParseRunOptions({"--nproc_per_node=4", "x"}, {});
  ASSERT_TRUE(underscore.ok());
  EXPECT_EQ(underscore->launch.nproc, 4);
  auto cpu = ParseRunOptions({"--nproc-per-node", "cpu", "x"}, {});
  ASSERT_TRUE(cpu.ok());
  EXPECT_GE(cpu->launch.nproc, 1);
  auto autos = ParseRunOptions({"--nproc-per-node", "auto", "x"},
                               {{"CUDA_VISIBLE_DEVICES", ""}});
  ASSERT_TRUE(autos.ok());
  EXPECT_EQ(autos->launch.nproc, cpu->launch.nproc);
  auto bad = ParseRunOptions({"--nproc-per-node", "two", "x"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--nproc-per-node"), std::string::npos);
  EXPECT_NE(bad.status().message().find("cpu, gpu or auto"), std::string::npos);
  auto gpu = ParseRunOptions({"--nproc-per-node", "gpu", "x"},
                             {{"CUDA_VISIBLE_DEVICES", ""}});
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("no NVIDIA GPU"), std::string::npos);
}

TEST(RunFlagsTest, Nnodes) {
  int lo = 0, hi = 0;
  ASSERT_TRUE(ParseNnodes("2:4", &lo, &hi).ok());
  EXPECT_EQ(lo, 2);
  EXPECT_EQ(hi, 4);
  ASSERT_TRUE(ParseNnodes("3", &lo, &hi).ok());
  EXPECT_EQ(lo, 3);
  EXPECT_EQ(hi, 3);
  for (const char* bad : {"0", "4:2", "a", "1:2:3", "", "-1"}) {
    EXPECT_FALSE(ParseNnodes(bad, &lo, &hi).ok()) << bad;
  }
}

TEST(RunFlagsTest, RejectsBadCombinationsAndValues) {
  EXPECT_FALSE(ParseRunOptions({"-m", "--no-python", "x"}, {}).ok());
  auto none = ParseRunOptions({"--standalone"}, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no command"), std::string::npos);
  auto negative = ParseRunOptions({"--shutdown-timeout", "-1", "x"}, {});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("--shutdown-timeout"),
            std::string::npos);
  auto restarts = ParseRunOptions({"x"}, {{"PET_MAX_RESTARTS", "many"}});
  ASSERT_FALSE(restarts.ok());
  EXPECT_NE(restarts.status().message().find("PET_MAX_RESTARTS"),
            std::string::npos);
}

TEST(RunFlagsTest, ShortOptionsAndSignals) {
  auto o = ParseRunOptions({"-m", "-r", "3", "-t1", "--signals-to-handle",
                            "SIGUSR1,TERM", "--shutdown-timeout=0", "pkg.mod"},
                           {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->launch.module);
  EXPECT_EQ(o->launch.redirects, std::vector<int>{3});
  EXPECT_EQ(o->launch.tees, std::vector<int>{1});
  EXPECT_EQ(o->supervisor.stop_signals, (std::vector<int>{SIGUSR1, SIGTERM}));
  EXPECT_EQ(o->supervisor.shutdown_timeout, absl::ZeroDuration());
}

TEST(RunFlagsTest, TypedRendezvousValues) {
  auto o = ParseRunOptions(
      {"--rdzv-backend", "c10d", "--rdzv-endpoint", "[fd00::1]:1234",
       "--rdzv-conf", "join_timeout=7,is_host=0", "--nnodes", "2:4", "x"},
      {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launch.endpoint.host, "fd00::1");
  EXPECT_EQ(o->launch.endpoint.port, 1234);
  EXPECT_EQ(o->launch.rdzv_config.join_timeout, absl::Seconds(7));
  ASSERT_TRUE(o->launch.rdzv_config.is_host.has_value());
  EXPECT_FALSE(*o->launch.rdzv_config.is_host);
  auto etcd = ParseRunOptions(
      {"--rdzv-backend=etcd-v3", "--rdzv-endpoint", "etcd:2379", "x"}, {});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  EXPECT_EQ(etcd->launch.rdzv_backend, RdzvBackend::kEtcdV3);
}

TEST(RunFlagsTest, HostileValuesAreRefusedAtParseTime) {
  auto bad = [](std::vector<std::string> args, EnvMap env,
                absl::string_view named) {
    args.push_back("x");
    auto o = ParseRunOptions(args, env);
    ASSERT_FALSE(o.ok()) << named;
    EXPECT_TRUE(absl::IsInvalidArgument(o.status())) << o.status();
    EXPECT_NE(o.status().message().find(named), std::string::npos)
        << o.status();
    EXPECT_EQ(o.status().message().find('\n'), std::string::npos);
    EXPECT_LT(o.status().message().size(), 1000u);
  };
  bad({"--rdzv-id", std::string(kMaxRdzvIdBytes + 1, 'j')}, {}, "--rdzv-id");
  bad({"--rdzv-id", "a b"}, {}, "--rdzv-id");
  bad({"--rdzv-id", "a/b"}, {}, "--rdzv-id");
  bad({"--local-addr", std::string(300, 'h')}, {}, "--local-addr");
  bad({"--local-addr", "-x"}, {}, "--local-addr");
  bad({"--master-addr", "http://m"}, {}, "--master-addr");
  bad({"--signals-to-handle", "SIGKILL,SIGCHLD"}, {}, "SIGKILL");
  bad({"--signals-to-handle", "SIGTERM,SIGCHLD"}, {}, "SIGCHLD");
  bad({"--nnodes", "2147483647", "--nproc-per-node", "2"}, {}, "--nnodes");
  bad({"--rdzv-backend", "c10d", "--rdzv-endpoint", "a:b:c"}, {},
      "--rdzv-endpoint");
  bad({"--rdzv-backend", "etcd", "--rdzv-endpoint", "  "}, {},
      "--rdzv-endpoint");
  bad({"--rdzv-conf", "keep_alive_interval=0"}, {}, "keep_alive_interval");
  bad({"--rdzv-conf", "join_timeout=nan"}, {}, "join_timeout");
  bad({"--shutdown-timeout", "1e400"}, {}, "--shutdown-timeout");
  bad({}, {{"TF_CONFIG", std::string(kMaxExecString, '{')}}, "TF_CONFIG");
  // A 100 KB multi-line value is quoted, escaped and cut.
  bad({}, {{"PET_RDZV_ID", std::string(100 * 1024, '\n')}}, "PET_RDZV_ID");
  EXPECT_TRUE(ParseRunOptions({"--nnodes", "65536", "--nproc-per-node", "4096",
                               "--signals-to-handle", "SIGTERM,SIGUSR1",
                               "--local-addr", "node-1.job", "x"},
                              {})
                  .ok());
}

TEST(RunFlagsTest, ConfigErrorsAtParseTime) {
  auto typo = ParseRunOptions({"--rdzv-conf", "join_timout=5", "x"}, {});
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(typo.status()));
  EXPECT_NE(typo.status().message().find("did you mean 'join_timeout'?"),
            std::string::npos);
  // From the environment too (Kubeflow sets PET_*).
  auto pet = ParseRunOptions({"x"}, {{"PET_RDZV_CONF", "last_cal_timeout=1"}});
  ASSERT_FALSE(pet.ok());
  EXPECT_NE(pet.status().message().find("'last_call_timeout'"),
            std::string::npos);
  EXPECT_TRUE(ParseRunOptions({"--rdzv-conf", "store_type=tcp", "x"}, {}).ok());
  auto endpoint = ParseRunOptions(
      {"--rdzv-backend", "c10d", "--rdzv-endpoint", "host:port", "x"}, {});
  ASSERT_FALSE(endpoint.ok());
  EXPECT_NE(endpoint.status().message().find("host:port"), std::string::npos);
  auto etcd = ParseRunOptions(
      {"--rdzv-backend", "etcd", "--rdzv-conf", "etcd_prefix=relative", "x"},
      {});
  ASSERT_FALSE(etcd.ok());
  EXPECT_NE(etcd.status().message().find("etcd_prefix"), std::string::npos);
  auto backend = ParseRunOptions({"--rdzv-backend", "zk", "x"}, {});
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("'zk'"), std::string::npos);
  auto framework = ParseRunOptions({"--framework", "torch", "x"}, {});
  ASSERT_FALSE(framework.ok());
  EXPECT_NE(framework.status().message().find("'torch'"), std::string::npos);
  auto roles = ParseRunOptions({"--tf-roles", "boss=x", "x"}, {});
  ASSERT_FALSE(roles.ok());
}

TEST(RunFlagsTest, StreamMasksResolvedAgainstNproc) {
  auto o = ParseRunOptions(
      {"--nproc-per-node", "3", "--redirects", "0:1,2:3", "--tee", "2", "x"},
      {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launch.redirects, (std::vector<int>{1, 0, 3}));
  EXPECT_EQ(o->launch.tees, (std::vector<int>{2, 2, 2}));
  auto bad = ParseRunOptions({"--redirects", "7", "x"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--redirects"), std::string::npos);
  bad = ParseRunOptions({"--tee", "0:x", "x"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tee"), std::string::npos);
}

TEST(RunFlagsTest, LocalRanksFilter) {
  auto o = ParseRunOptions({"--local-ranks-filter", "0,3", "x"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launch.local_ranks_filter, (std::set<int>{0, 3}));
  auto bad = ParseRunOptions({"--local-ranks-filter", "0,one", "x"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--local-ranks-filter"),
            std::string::npos);
}

TEST(RunFlagsTest, TypedDiscoveryValues) {
  auto o = ParseRunOptions(
      {"--framework", "mxnet", "--tf-roles", "ps=server", "x"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->discovery.framework, Framework::kMXNet);
  EXPECT_EQ(o->discovery.tf_roles.at("ps"), "server");
  EXPECT_EQ(o->discovery.tf_roles.at("worker"), "worker");
}

}  // namespace
}  // namespace distjob

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace distjob {
namespace {

std::string FakeNode(const std::string& name) {
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  for (const char* d :
       {"", "/sys", "/sys/class", "/sys/class/drm", "/sys/class/drm/renderD128",
        "/sys/class/drm/renderD128/device", "/dev", "/dev/dri"}) {
    mkdir((root + d).c_str(), 0755);
  }
  return root;
}

// An Intel node: one render node of vendor 0x8086 in the pod.
TEST(RunFlagsTest, NprocXpuAndAutoCountIntelGpus) {
  const std::string root = FakeNode("intel");
  std::ofstream(root + "/sys/class/drm/renderD128/device/vendor") << "0x8086\n";
  std::ofstream(root + "/dev/dri/renderD128") << "";
  EXPECT_EQ(*ResolveNprocPerNode("xpu", {}, root), 1);
  EXPECT_EQ(*ResolveNprocPerNode("auto", {}, root), 1);
  auto gpu = ResolveNprocPerNode("gpu", {}, root);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("--nproc-per-node gpu"),
            std::string::npos);
  auto empty = ResolveNprocPerNode("xpu", {}, FakeNode("cpu"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no Intel GPU"), std::string::npos);
  auto bad = ParseRunOptions({"--nproc-per-node", "tpu", "x"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cuda, xpu"), std::string::npos);
}

TEST(RunFlagsTest, WorldSizeIsCheckedOnTheNodesThatWillRun) {
  // 1000000 x 4096 overflows an int, but --standalone runs one node.
  auto big = ParseRunOptions(
      {"--nnodes", "1:1000000", "--nproc-per-node", "4096", "x"}, {});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("2^31"), std::string::npos);
  auto standalone = ParseRunOptions({"--standalone", "--nnodes", "1:1000000",
                                     "--nproc-per-node", "4096", "x"},
                                    {});
  ASSERT_TRUE(standalone.ok()) << standalone.status();
  EXPECT_EQ(standalone->launch.max_nodes, 1);
}

TEST(RunFlagsTest, StoreTokenFromTheVariableAndBadOnesExit2) {
  auto o = ParseRunOptions({"x"}, {{"DISTJOB_RDZV_TOKEN", "s3cret"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->security.token, "s3cret");
  auto empty = ParseRunOptions({"x"}, {{"DISTJOB_RDZV_TOKEN", ""}});
  EXPECT_TRUE(absl::IsInvalidArgument(empty.status()));
  EXPECT_NE(empty.status().message().find("DISTJOB_RDZV_TOKEN is set but "
                                          "empty"),
            absl::string_view::npos);
  auto missing = ParseRunOptions(
      {"--rdzv-token-file", "/nonexistent/distjob-token", "x"}, {});
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status()));
  EXPECT_NE(missing.status().message().find("/nonexistent/distjob-token"),
            absl::string_view::npos);
  auto health = ParseRunOptions({"--health-tls", "x"}, {});
  EXPECT_TRUE(absl::IsInvalidArgument(health.status()));
}

TEST(RunFlagsTest, PreflightChecksNeedPreflight) {
  auto o =
      ParseRunOptions({"--preflight", "--check-path", "/data", "--check-path",
                       "/models", "--check-writable", "/ckpt",
                       "--health-daemon", "unix:///run/h.sock", "x"},
                      {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->preflight.enabled);
  EXPECT_EQ(o->preflight.paths, (std::vector<std::string>{"/data", "/models"}));
  EXPECT_EQ(o->preflight.writable_paths, std::vector<std::string>{"/ckpt"});
  EXPECT_EQ(o->preflight.health_daemon, "unix:///run/h.sock");
  for (const char* flag : {"--check-path", "--check-writable"}) {
    auto alone = ParseRunOptions({flag, "/data", "x"}, {});
    ASSERT_FALSE(alone.ok()) << flag;
    EXPECT_NE(alone.status().message().find(flag), std::string::npos)
        << alone.status();
  }
  auto daemon = ParseRunOptions({"--health-daemon", "unix:///h.sock", "x"}, {});
  EXPECT_FALSE(daemon.ok());
  auto tcp = ParseRunOptions(
      {"--preflight", "--health-daemon", "tcp://127.0.0.1:1", "x"}, {});
  ASSERT_FALSE(tcp.ok());
  EXPECT_NE(tcp.status().message().find("--health-daemon"), std::string::npos)
      << tcp.status();
}

TEST(RunFlagsTest, MpiRoleFromTheFlagsOrTheMpiOperator) {
  auto o = ParseRunOptions({"--framework", "mpi", "--", "mpirun", "x"}, {});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mpi.role, MpiRole::kLauncher);
  EXPECT_EQ(o->mpi.spawn_port, kDefaultSpawnPort);
  // A worker runs no command of its own, and needs the token.
  o = ParseRunOptions({"--framework", "mpi", "--role", "worker"},
                      {{"DISTJOB_RDZV_TOKEN", "t"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mpi.role, MpiRole::kWorker);
  o = ParseRunOptions({"--framework", "mpi", "--role", "worker"}, {});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--rdzv-token-file"), std::string::npos);
  // The MPI Operator's variable, under --framework auto only.
  o = ParseRunOptions({"--spawn-port", "2222"}, {{"K_MPI_JOB_ROLE", "worker"},
                                                 {"DISTJOB_RDZV_TOKEN", "t"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mpi.role, MpiRole::kWorker);
  EXPECT_EQ(o->mpi.spawn_port, 2222);
  o = ParseRunOptions({"mpirun", "x"}, {{"K_MPI_JOB_ROLE", "launcher"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mpi.role, MpiRole::kLauncher);
  o = ParseRunOptions({"--framework", "pytorch", "x"},
                      {{"K_MPI_JOB_ROLE", "launcher"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mpi.role, MpiRole::kNone);
  EXPECT_FALSE(ParseRunOptions({"--spawn-port", "0", "x"}, {}).ok());
}

TEST(RunFlagsTest, AVolcanoMpiJobsPodMayHaveNoCommandUntilDiscovery) {
  // Its role is decided after discovery (agent/mpi_plan.h): until then
  // the parsed options name none, and a worker's empty command passes.
  const EnvMap volcano = {{"VC_MPIWORKER_HOSTS", "j-mpiworker-0.j"}};
  auto o = ParseRunOptions({}, volcano);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->mpi.role, MpiRole::kNone);
  EXPECT_TRUE(o->command.empty());
  EXPECT_TRUE(ParseRunOptions({}, {{"VC_MPIWORKER_NUM", "2"}}).ok());
  // Renamed tasks, the flag's name counts.
  EXPECT_FALSE(ParseRunOptions({"--mpi-worker-task", "w"}, volcano).ok());
  EXPECT_TRUE(
      ParseRunOptions({"--mpi-worker-task", "w"}, {{"VC_W_HOSTS", "j-w-0.j"}})
          .ok());
  // Not under another framework, nor without the worker task's hosts.
  EXPECT_FALSE(ParseRunOptions({"--framework", "pytorch"}, volcano).ok());
  EXPECT_FALSE(ParseRunOptions({}, {{"VC_WORKER_HOSTS", "h"}}).ok());
}

}  // namespace
}  // namespace distjob
