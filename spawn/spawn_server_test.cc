#include "spawn/spawn_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/loopback_testing.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/spawn.grpc.pb.h"

namespace distjob {
namespace {

using spawn::SpawnReply;
using spawn::SpawnRequest;

constexpr char kToken[] = "s3cret-token";

struct Outcome {
  grpc::Status status;
  std::string out, err;
  int exit_status = -1, exit_signal = -1;
};

class SpawnServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(SpawnLimits()); }
  // (Re)starts the server under test with `limits`.
  void StartServer(const SpawnLimits& limits) {
    server_.reset();
    StoreSecurity security;
    security.token = kToken;
    auto s = SpawnServer::Start("127.0.0.1", 0, security,
                                {{"PATH", "/usr/bin:/bin"}}, limits);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    marker_ = absl::StrCat(::testing::TempDir(), "/spawned-", getpid());
    std::remove(marker_.c_str());
  }
  std::unique_ptr<spawn::Spawner::Stub> Stub() {
    return spawn::Spawner::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
  }
  // Runs `command` to its end with `header` as the authorization metadata
  // (none when empty), sending `input` then closing stdin.
  Outcome Call(const std::string& command, const std::string& header,
               const std::string& input = "") {
    auto stub = Stub();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(20));
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    auto stream = stub->Spawn(&ctx);
    SpawnRequest req;
    req.set_command(command);
    stream->Write(req);
    if (!input.empty()) {
      req.set_stdin_data(input);
      stream->Write(req);
    }
    req.set_stdin_close(true);
    stream->Write(req);
    Outcome o;
    SpawnReply reply;
    while (stream->Read(&reply)) {
      if (reply.has_stdout_data()) o.out += reply.stdout_data();
      if (reply.has_stderr_data()) o.err += reply.stderr_data();
      if (reply.kind_case() == SpawnReply::kExitStatus) {
        o.exit_status = reply.exit_status();
        stream->WritesDone();
      }
      if (reply.kind_case() == SpawnReply::kExitSignal) {
        o.exit_signal = reply.exit_signal();
        stream->WritesDone();
      }
    }
    o.status = stream->Finish();
    return o;
  }
  bool MarkerExists() { return access(marker_.c_str(), F_OK) == 0; }
  bool Exists(const std::string& path) {
    return access(path.c_str(), F_OK) == 0;
  }

  std::unique_ptr<SpawnServer> server_;
  std::string marker_;
};

TEST(SpawnServerStartTest, RefusesToStartWithoutTokenOrMutualTls) {
  auto s = SpawnServer::Start("127.0.0.1", 0, StoreSecurity(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("--rdzv-token-file"), std::string::npos);
  StoreSecurity tls_only;  // server TLS without a client CA is not enough
  tls_only.cert_pem = "cert";
  tls_only.key_pem = "key";
  EXPECT_FALSE(SpawnSecurityIsEnough(tls_only));
  tls_only.ca_pem = "ca";
  EXPECT_TRUE(SpawnSecurityIsEnough(tls_only));
}

TEST_F(SpawnServerTest, RunsTheCommandWithStdinAndReturnsItsStatus) {
  const Outcome o = Call("read x; echo \"out $x\"; echo oops >&2; exit 3",
                         absl::StrCat("Bearer ", kToken), "hello\n");
  EXPECT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.out, "out hello\n");
  EXPECT_EQ(o.err, "oops\n");
  EXPECT_EQ(o.exit_status, 3);
}

TEST_F(SpawnServerTest, ReportsTheSignalThatEndedTheCommand) {
  const Outcome o = Call("kill -9 $$", absl::StrCat("Bearer ", kToken));
  EXPECT_EQ(o.exit_signal, 9);
}

TEST_F(SpawnServerTest, NoTokenIsRefusedAndNothingRuns) {
  const Outcome o = Call("touch " + marker_, "");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(o.exit_status, -1);
  EXPECT_FALSE(MarkerExists());
}

TEST_F(SpawnServerTest, AWrongTokenIsRefusedAndNothingRuns) {
  for (const std::string& header :
       {std::string("Bearer wrong-token!"), std::string(kToken),
        absl::StrCat("Bearer ", kToken, "x")}) {
    const Outcome o = Call("touch " + marker_, header);
    EXPECT_EQ(o.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << header;
    EXPECT_FALSE(MarkerExists()) << header;
  }
}

TEST_F(SpawnServerTest, TheCallersEndEndsTheCommandsGroup) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  auto stream = stub->Spawn(&ctx);
  SpawnRequest req;
  // The shell and its background child both ignore SIGTERM: the group must
  // still end (SIGKILL after the grace).
  req.set_command("trap '' TERM; sleep 60 & echo $!; wait");
  ASSERT_TRUE(stream->Write(req));
  SpawnReply reply;
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_stdout_data());
  const pid_t child = std::stoi(reply.stdout_data());
  ASSERT_EQ(kill(child, 0), 0);
  ctx.TryCancel();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool gone = false;
  while (!gone && absl::Now() < deadline) {
    FILE* f = std::fopen(absl::StrCat("/proc/", child, "/stat").c_str(), "r");
    char state = 'Z';
    if (f != nullptr) {
      if (std::fscanf(f, "%*d (%*[^)]) %c", &state) != 1) state = 'Z';
      std::fclose(f);
    }
    gone = state == 'Z';
    if (!gone) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone) << "pid " << child << " outlived its call";
}

TEST_F(SpawnServerTest, AFirstMessageThatIsNotACommandIsRefused) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  auto stream = stub->Spawn(&ctx);
  SpawnRequest req;
  req.set_stdin_data("x");
  stream->Write(req);
  stream->WritesDone();
  SpawnReply reply;
  EXPECT_FALSE(stream->Read(&reply));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

grpc::Status EndJob(spawn::Spawner::Stub* stub, const std::string& header,
                    int code, const std::string& reason) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (!header.empty()) ctx.AddMetadata("authorization", header);
  spawn::EndJobRequest req;
  req.set_exit_code(code);
  req.set_reason(reason);
  spawn::EndJobReply reply;
  return stub->EndJob(&ctx, req, &reply);
}

TEST_F(SpawnServerTest, TheFirstEndOfTheJobWithTheTokenIsKept) {
  EXPECT_FALSE(server_->job_end().has_value());
  auto stub = Stub();
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  ASSERT_TRUE(EndJob(stub.get(), bearer, 138, "worker lost\nsecond").ok());
  ASSERT_TRUE(EndJob(stub.get(), bearer, 0, "later").ok());
  const std::optional<JobEnd> end = server_->job_end();
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->exit_code, 138);
  EXPECT_EQ(end->reason.find('\n'), std::string::npos) << end->reason;
  EXPECT_NE(end->reason.find("worker lost"), std::string::npos);
  EXPECT_FALSE(end->caller.empty());
}

TEST_F(SpawnServerTest, AnEndOfTheJobWithoutTheTokenIsRefused) {
  auto stub = Stub();
  EXPECT_EQ(EndJob(stub.get(), "", 0, "x").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(EndJob(stub.get(), "Bearer wrong", 0, "x").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(server_->job_end().has_value());
}

TEST_F(SpawnServerTest, AnExitCodeOutside0To255IsRefused) {
  auto stub = Stub();
  const std::string bearer = absl::StrCat("Bearer ", kToken);
  EXPECT_EQ(EndJob(stub.get(), bearer, 256, "x").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(EndJob(stub.get(), bearer, -1, "x").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(server_->job_end().has_value());
}

// The bounds the README states ("What the spawn service lets in"): the
// tests below shrink each one and show the server holds it; this one pins
// the numbers the README gives.
TEST(SpawnLimitsTest, TheDefaultsAreTheDocumentedBounds) {
  const SpawnLimits limits;
  EXPECT_EQ(limits.max_spawns, 64);
  EXPECT_EQ(limits.max_message_bytes, 128 * 1024);
  EXPECT_EQ(limits.output_chunk_bytes, 32 * 1024);
  EXPECT_EQ(limits.max_conns_per_peer, 128u);
  EXPECT_EQ(limits.kill_grace, absl::Seconds(3));
}

bool WaitUntil(const std::function<bool()>& done,
               absl::Duration within = absl::Seconds(10)) {
  const absl::Time until = absl::Now() + within;
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST_F(SpawnServerTest, PastMaxSpawnsACallIsRefusedAndRunsNothing) {
  SpawnLimits limits;
  limits.max_spawns = 2;
  StartServer(limits);
  // Two commands that run until their callers go.
  struct Held {
    std::unique_ptr<spawn::Spawner::Stub> stub;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<SpawnRequest, SpawnReply>> call;
  };
  std::vector<std::unique_ptr<Held>> held;
  for (int i = 0; i < 2; ++i) {
    auto h = std::make_unique<Held>();
    h->stub = Stub();
    h->ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    h->call = h->stub->Spawn(&h->ctx);
    SpawnRequest req;
    req.set_command("echo up; exec sleep 60");
    ASSERT_TRUE(h->call->Write(req));
    SpawnReply reply;
    ASSERT_TRUE(h->call->Read(&reply));  // it runs
    ASSERT_EQ(reply.stdout_data(), "up\n");
    held.push_back(std::move(h));
  }
  Outcome o = Call("touch " + marker_, absl::StrCat("Bearer ", kToken));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << o.status.error_message();
  EXPECT_NE(o.status.error_message().find("2 commands"), std::string::npos);
  EXPECT_FALSE(MarkerExists());
  // A place frees when a caller goes.
  held[0]->ctx.TryCancel();
  held[0]->call->Finish();
  ASSERT_TRUE(WaitUntil([&] {
    o = Call("touch " + marker_, absl::StrCat("Bearer ", kToken));
    return o.status.ok();
  }));
  EXPECT_EQ(o.exit_status, 0);
  EXPECT_TRUE(MarkerExists());
  held[1]->ctx.TryCancel();
  held[1]->call->Finish();
}

TEST_F(SpawnServerTest, AMessageOverTheLimitEndsTheCallAndRunsNothing) {
  SpawnLimits limits;
  limits.max_message_bytes = 4096;
  StartServer(limits);
  // A command line past the limit: refused as a whole, nothing runs.
  const std::string big = absl::StrCat(
      "touch ", marker_, " # ", std::string(limits.max_message_bytes, 'x'));
  Outcome o = Call(big, absl::StrCat("Bearer ", kToken));
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << o.status.error_message();
  EXPECT_EQ(o.exit_status, -1);
  EXPECT_FALSE(MarkerExists());
  // A stdin chunk past it ends the call, and the command's group with it.
  const std::string done = marker_ + ".done";
  o = Call(absl::StrCat("cat >/dev/null && touch ", done),
           absl::StrCat("Bearer ", kToken),
           std::string(limits.max_message_bytes + 1, 'y'));
  EXPECT_FALSE(o.status.ok());
  EXPECT_EQ(o.exit_status, -1);
  EXPECT_FALSE(Exists(done));
  // Just within it, the same call runs.
  o = Call(absl::StrCat("cat >/dev/null && touch ", done),
           absl::StrCat("Bearer ", kToken),
           std::string(limits.max_message_bytes - 16, 'y'));
  EXPECT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.exit_status, 0);
  EXPECT_TRUE(Exists(done));
  std::remove(done.c_str());
}

TEST_F(SpawnServerTest, OutputComesInChunksOfAtMostTheLimit) {
  SpawnLimits limits;
  limits.output_chunk_bytes = 1000;
  StartServer(limits);
  auto stub = Stub();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  auto stream = stub->Spawn(&ctx);
  SpawnRequest req;
  req.set_command("head -c 100000 /dev/zero; head -c 5000 /dev/zero >&2");
  ASSERT_TRUE(stream->Write(req));
  size_t out = 0, err = 0, replies = 0;
  SpawnReply reply;
  while (stream->Read(&reply)) {
    if (reply.has_stdout_data()) {
      ++replies;
      EXPECT_LE(reply.stdout_data().size(), 1000u);
      out += reply.stdout_data().size();
    }
    if (reply.has_stderr_data()) {
      EXPECT_LE(reply.stderr_data().size(), 1000u);
      err += reply.stderr_data().size();
    }
    if (reply.kind_case() == SpawnReply::kExitStatus) stream->WritesDone();
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(out, 100000u);
  EXPECT_EQ(err, 5000u);
  EXPECT_GE(replies, 100u);
}

// A raw connection from `from` (any 127/8 address) that has sent HTTP/2's
// preface.
int Connect(int port, const char* from = "127.0.0.1") {
  const int fd = ConnectLoopback(port, from);
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  EXPECT_EQ(send(fd, preface.data(), preface.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(preface.size()));
  return fd;
}

// Whether the server closed `fd` (a read sees its end) within `within`.
bool ClosedByServer(int fd, absl::Duration within) {
  return WaitUntil(
      [&] {
        pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) return false;
        char buf[512];
        while (true) {
          const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (n == 0) return true;
          if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
        }
      },
      within);
}

TEST_F(SpawnServerTest, ConnectionsPastThePerAddressCapAreClosed) {
  SpawnLimits limits;
  limits.max_conns_per_peer = 2;
  StartServer(limits);
  const int kept[2] = {Connect(server_->port()), Connect(server_->port())};
  const int past = Connect(server_->port());
  EXPECT_TRUE(ClosedByServer(past, absl::Seconds(5)));
  // The two within the cap are gRPC's, waiting for their settings.
  for (int fd : kept) EXPECT_FALSE(ClosedByServer(fd, absl::Milliseconds(200)));
  for (int fd : kept) close(fd);
  close(past);
}

TEST_F(SpawnServerTest, AtTheTotalCapANewAddressEvictsTheBiggestOnesOldest) {
  SpawnLimits limits;
  limits.max_conns = 2;
  limits.max_conns_per_peer = 2;
  StartServer(limits);
  const int flood[2] = {Connect(server_->port(), "127.0.0.2"),
                        Connect(server_->port(), "127.0.0.2")};
  // The launcher elsewhere still gets in, in place of the flood's oldest.
  const int member = Connect(server_->port(), "127.0.0.3");
  EXPECT_TRUE(ClosedByServer(flood[0], absl::Seconds(5)));
  EXPECT_FALSE(ClosedByServer(member, absl::Milliseconds(200)));
  for (int fd : flood) close(fd);
  close(member);
}

}  // namespace
}  // namespace distjob
