#include "common/json.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

constexpr char kReplacement[] = "\xef\xbf\xbd";  // U+FFFD

TEST(DumpJsonTest, EscapesQuotesAndControlCharacters) {
  const std::string out = DumpJson(Json{{"k", "a\"b\\c\n\x01"}});
  EXPECT_EQ(out, R"({"k":"a\"b\\c\n\u0001"})");
}

TEST(DumpJsonTest, KeepsValidUtf8) {
  EXPECT_EQ(DumpJson(Json("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5")),
            "\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5\"");
}

class InvalidUtf8Test : public testing::TestWithParam<const char*> {};

TEST_P(InvalidUtf8Test, StillValidJsonWithReplacementCharacter) {
  const std::string bad = std::string("before ") + GetParam() + " after";
  std::string out;
  ASSERT_NO_THROW(out = DumpJson(Json{{"message", bad}}));
  auto parsed = ParseJson(out, "dumped");
  ASSERT_TRUE(parsed.ok()) << out;
  const std::string text = (*parsed)["message"].get<std::string>();
  EXPECT_NE(text.find(kReplacement), std::string::npos) << text;
  EXPECT_EQ(text.rfind("before ", 0), 0u) << text;
  EXPECT_NE(text.find(" after"), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(Bytes, InvalidUtf8Test,
                         testing::Values("\xff\xfe",          // never UTF-8
                                         "\xc0\xaf",          // overlong '/'
                                         "\xed\xa0\x80",      // a surrogate
                                         "\xf4\x90\x80\x80",  // > U+10FFFF
                                         "\xe2\x82"));        // cut short

TEST(ValidUtf8Test, ReplacesOnlyInvalidSequences) {
  EXPECT_EQ(ValidUtf8("ok \xe2\x82\xac"), "ok \xe2\x82\xac");
  EXPECT_EQ(ValidUtf8("a\xff"
                      "b"),
            std::string("a") + kReplacement + "b");
  EXPECT_EQ(ValidUtf8(std::string("nul\0in", 6)), std::string("nul\0in", 6));
}

TEST(DumpJsonTest, KeepsInsertionOrder) {
  Json o;
  o["zeta"] = 1;
  o["alpha"] = "\xff";
  EXPECT_EQ(DumpJson(o),
            std::string(R"({"zeta":1,"alpha":")") + kReplacement + "\"}");
}

TEST(DumpJsonTest, IndentPrettyPrints) {
  EXPECT_EQ(DumpJson(Json{{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

TEST(ParseJsonTest, ParsesObjects) {
  auto v = ParseJson(R"({"message": {"errorCode": 3}})", "error file");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)["message"]["errorCode"], 3);
}

TEST(ParseJsonTest, RejectsNonJsonNamingTheSource) {
  auto v = ParseJson("Traceback (most recent call last):", "/tmp/err.json");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("/tmp/err.json"), std::string::npos);
  EXPECT_FALSE(ParseJson("", "empty").ok());
  EXPECT_FALSE(ParseJson("{\"a\": \"\xff\"}", "bad bytes").ok());
}

// Python's json.dumps writes an undecodable byte (surrogateescape) as a
// lone surrogate: valid JSON syntax, read as U+FFFD, the rest kept.
TEST(ParseJsonTest, LoneSurrogateEscapesBecomeReplacementCharacters) {
  auto j = ParseJson(R"({"m":"bad \udcff byte, \ud800 high, \udc00"})",
                     "error file");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["m"],
            "bad \xef\xbf\xbd byte, \xef\xbf\xbd high, \xef\xbf\xbd");
  // A valid pair, an escaped backslash before "u", and other escapes stay.
  j = ParseJson(R"({"m":"\ud83d\ude00 \\udcff \n\"\u00e9"})", "x");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["m"], "\xf0\x9f\x98\x80 \\udcff \n\"\xc3\xa9");
  // A truncated escape is still refused.
  EXPECT_FALSE(ParseJson(R"({"m":"\ud8"})", "x").ok());
}

}  // namespace
}  // namespace distjob
