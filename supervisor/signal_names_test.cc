#include "supervisor/signal_names.h"

#include <csignal>

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(SignalNamesTest, NamesAndNumbersRoundTrip) {
  for (int sig = 1; sig <= SIGRTMAX; ++sig) {
    if (sig > SIGSYS && sig < SIGRTMIN) continue;  // glibc-reserved
    auto parsed = ParseSignal(SignalName(sig));
    ASSERT_TRUE(parsed.ok()) << SignalName(sig);
    EXPECT_EQ(*parsed, sig);
  }
}

TEST(SignalNamesTest, AcceptsShortLowercaseAndNumbers) {
  EXPECT_EQ(*ParseSignal("term"), SIGTERM);
  EXPECT_EQ(*ParseSignal(" SIGUSR1 "), SIGUSR1);
  EXPECT_EQ(*ParseSignal("9"), SIGKILL);
  EXPECT_FALSE(ParseSignal("SIGNOPE").ok());
  EXPECT_FALSE(ParseSignal("0").ok());
  EXPECT_FALSE(ParseSignalList("TERM,,INT").ok());
}

}  // namespace
}  // namespace distjob
