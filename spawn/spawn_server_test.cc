#include "spawn/spawn_server.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
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
  void SetUp() override {
    StoreSecurity security;
    security.token = kToken;
    auto s = SpawnServer::Start("127.0.0.1", 0, security,
                                {{"PATH", "/usr/bin:/bin"}});
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

}  // namespace
}  // namespace distjob
