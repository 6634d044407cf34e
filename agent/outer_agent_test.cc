#include "agent/outer_agent.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(OuterAgentTest, ReplyRoundTrips) {
  HandoverReply reply;
  reply.agreed = true;
  reply.settings = {{"DISTJOB_HEALTH_PORT", "8080"},
                    {"DISTJOB_TERMINATION_LOG", "/tmp/a\nrefuse x"}};
  reply.lost = {"the token"};
  reply.rdzv_key_suffix = "-inner";
  auto parsed = ParseHandoverReply(EncodeHandoverReply(reply));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->agreed);
  EXPECT_EQ(parsed->settings.at("DISTJOB_HEALTH_PORT"), "8080");
  // A newline in a value cannot forge a line.
  EXPECT_EQ(parsed->settings.at("DISTJOB_TERMINATION_LOG"), "/tmp/a refuse x");
  EXPECT_EQ(parsed->lost, std::vector<std::string>{"the token"});
  EXPECT_EQ(parsed->rdzv_key_suffix, "-inner");
}

TEST(OuterAgentTest, RefusalAndCutAnswers) {
  HandoverReply reply;
  reply.refusal = "started by a worker of X";
  auto parsed = ParseHandoverReply(EncodeHandoverReply(reply));
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->agreed);
  EXPECT_EQ(parsed->refusal, "started by a worker of X");
  EXPECT_FALSE(ParseHandoverReply("ok\nset A=1\n").ok());  // no "end"
  EXPECT_FALSE(ParseHandoverReply("hello\nend\n").ok());
}

TEST(OuterAgentTest, DescendantsOnly) {
  EXPECT_TRUE(IsDescendantOf(getpid(), getppid()));
  EXPECT_FALSE(IsDescendantOf(getppid(), getpid()));
  EXPECT_FALSE(IsDescendantOf(getpid(), getpid()));
}

TEST(OuterAgentTest, StaleMarkerIsUnavailable) {
  auto reply =
      AskOuterToStepAside("/nonexistent/distjob/agent.sock", absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(reply.status())) << reply.status();
}

// The request is made while the stop signals are blocked: a readable
// stop_fd (their signalfd) ends the wait at once, not after the timeout.
TEST(OuterAgentTest, AStopEndsTheWaitForAnOuterThatDoesNotAnswer) {
  // Bazel's TempDir is too long for a socket's 108 bytes.
  char dir[] = "/tmp/outer-test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/silent.sock";
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(listen(listener, 4), 0);         // never accepted, never answered
  const int stop = eventfd(1, EFD_CLOEXEC);  // readable: a stop is pending
  ASSERT_GE(stop, 0);
  auto reply = AskOuterToStepAside(path, absl::Seconds(600), stop);
  EXPECT_TRUE(absl::IsCancelled(reply.status())) << reply.status();
  close(stop);
  close(listener);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(OuterAgentTest, AnswersAChildNotItself) {
  std::atomic<int> asked{0};
  auto server = HandoverServer::Start([&](pid_t) {
    ++asked;
    HandoverReply r;
    r.agreed = true;
    r.settings["DISTJOB_METRICS_PORT"] = "9400";
    return r;
  });
  ASSERT_TRUE(server.ok()) << server.status();
  // This process is not its own descendant: no answer.
  EXPECT_FALSE(AskOuterToStepAside((*server)->path(), absl::Seconds(5)).ok());
  EXPECT_EQ(asked.load(), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto r = AskOuterToStepAside((*server)->path(), absl::Seconds(5));
    _exit(r.ok() && r->agreed && r->settings.count("DISTJOB_METRICS_PORT") == 1
              ? 0
              : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(asked.load(), 1);
}

}  // namespace
}  // namespace distjob
