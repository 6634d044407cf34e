#include "common/duration.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(DurationTest, AcceptsBareSecondsAndUnits) {
  EXPECT_EQ(*ParseDuration("30", "x"), absl::Seconds(30));
  EXPECT_EQ(*ParseDuration("0.5", "x"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("250ms", "x"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDuration("2m", "x"), absl::Minutes(2));
  EXPECT_EQ(*ParseDuration("1h", "x"), absl::Hours(1));
  EXPECT_EQ(*ParseDuration("0", "x"), absl::ZeroDuration());
}

TEST(DurationTest, RejectsGarbageAndNegativesNamingTheFlag) {
  for (const char* bad : {"", "abc", "1x", "ms", "nan", "inf"}) {
    auto d = ParseDuration(bad, "--shutdown-timeout");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("--shutdown-timeout"),
              std::string::npos);
  }
  auto negative = ParseDuration("-1", "--shutdown-timeout");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("negative"), std::string::npos);
}

TEST(DurationTest, RejectsOverflowAndDurationsBeyondTheCap) {
  for (const char* bad : {"1e400", "1e300h", "31536001", "8761h"}) {
    auto d = ParseDuration(bad, "--dns-timeout");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("--dns-timeout"), std::string::npos);
  }
  EXPECT_TRUE(ParseDuration("8760h", "--dns-timeout").ok());
}

TEST(DurationTest, FormatsSeconds) {
  EXPECT_EQ(FormatSeconds(absl::Seconds(30)), "30s");
  EXPECT_EQ(FormatSeconds(absl::Milliseconds(1500)), "1.5s");
}

}  // namespace
}  // namespace distjob
