#include "supervisor/console_lines.h"

#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace {

std::string FeedAll(ConsoleLines& lines,
                    std::initializer_list<const char*> in) {
  std::string out;
  for (const char* chunk : in) lines.Feed(chunk, &out);
  return out;
}

TEST(ConsoleLinesTest, JsonHeadWrapsEveryLineAsOneObject) {
  ConsoleLines lines("[r0]:");
  lines.SetJsonFields(Json{{"rank", 0}});
  std::string out = FeedAll(lines, {"a \"q\" \\\x01\n\xff", "b\r", "\rc"});
  lines.Finish(&out);
  EXPECT_EQ(out,
            "{\"rank\":0,\"line\":\"a \\\"q\\\" \\\\\\u0001\"}\n"
            "{\"rank\":0,\"line\":\"\xef\xbf\xbd"
            "b\"}\n"
            "{\"rank\":0,\"line\":\"c\"}\n");
}

TEST(ConsoleLinesTest, PrefixesEveryLineAcrossChunks) {
  ConsoleLines lines("[r0]:");
  std::string out = FeedAll(lines, {"a\nb", "c\n\nd"});
  EXPECT_EQ(out, "[r0]:a\n[r0]:bc\n[r0]:\n");
  lines.Finish(&out);
  EXPECT_EQ(out, "[r0]:a\n[r0]:bc\n[r0]:\n[r0]:d\n");
}

// tqdm draws "\r 10%|..." and no newline until it is done: every redraw
// must reach the console as it comes, not at the worker's exit.
TEST(ConsoleLinesTest, ProgressAfterCarriageReturnPassesThroughAtOnce) {
  ConsoleLines lines("[r0]:");
  std::string out;
  lines.Feed("\r 10%", &out);
  EXPECT_EQ(out, "\r[r0]: 10%");
  out.clear();
  lines.Feed("|#\r 20%", &out);
  EXPECT_EQ(out, "|#\r[r0]: 20%");
  out.clear();
  lines.Feed("\ndone\n", &out);
  EXPECT_EQ(out, "\n[r0]:done\n");
}

TEST(ConsoleLinesTest, OverLongLinesAreSplitAndTheBufferStaysBounded) {
  ConsoleLines lines("p:", 4);
  std::string out = FeedAll(lines, {"abcdefghij", "kl\nxy"});
  EXPECT_EQ(out, "p:abcd\np:efgh\np:ijkl\n");
  lines.Finish(&out);
  EXPECT_EQ(out, "p:abcd\np:efgh\np:ijkl\np:xy\n");
}

TEST(ConsoleLinesTest, SplitNeverCutsAUtf8Sequence) {
  ConsoleLines lines("", 4);
  std::string out;
  lines.Feed(
      "ab\xE2\x82\xAC"
      "cd\n",
      &out);
  EXPECT_EQ(out,
            "ab\n\xE2\x82\xAC"
            "c\nd\n");
}

// 200 MB with no newline once cost 16 s of CPU and 590 MB (a rescan of
// an unbounded buffer per read): what each read gives back is bounded and
// nothing is held back. Its speed is a benchmark's (bench/run.py --only
// tee), not a timed test's.
TEST(ConsoleLinesTest, AHugeLineWithoutNewlineIsBounded) {
  ConsoleLines lines("[r0]:");
  const std::string chunk(65536, 'x');
  size_t total = 0;
  for (int i = 0; i < 3200; ++i) {  // 200 MiB
    std::string out;
    lines.Feed(chunk, &out);
    total += out.size();
    ASSERT_LE(out.size(), 2 * (chunk.size() + 64));
  }
  std::string out;
  lines.Finish(&out);
  total += out.size();
  EXPECT_GE(total, size_t{200} << 20);
}

TEST(ConsoleLinesTest, CrLfEndsOneLine) {
  ConsoleLines text("[r0]:");
  std::string out = FeedAll(text, {"a\r\nb\r", "\nc\n"});
  text.Finish(&out);
  EXPECT_EQ(out, "[r0]:a\r\n[r0]:b\r\n[r0]:c\n");
  ConsoleLines json("[r0]:");
  json.SetJsonFields(Json{{"rank", 0}});
  out = FeedAll(json, {"a\r\nb\r", "\nc\n"});
  json.Finish(&out);
  EXPECT_EQ(out,
            "{\"rank\":0,\"line\":\"a\"}\n{\"rank\":0,\"line\":\"b\"}\n"
            "{\"rank\":0,\"line\":\"c\"}\n");
}

}  // namespace
}  // namespace distjob
