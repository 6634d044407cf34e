#include "bench/rank_sim_lib.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distjob {
namespace ranksim {
namespace {

std::string U64(uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

std::string Bytes(const std::string& s) { return U64(s.size()) + s; }

TEST(RankSimFrames, AreTheValidatedNumberingInHostOrder) {
  std::string out;
  EncodeValidate(Dialect::kValidated, &out);
  const uint32_t magic = 0x3C85F7CE;
  EXPECT_EQ(out, std::string(1, '\0') +
                     std::string(reinterpret_cast<const char*>(&magic), 4));
  out.clear();
  EncodeSet(Dialect::kValidated, &out, "k", "vv");
  EXPECT_EQ(out, std::string(1, '\1') + Bytes("k") + Bytes("vv"));
  out.clear();
  EncodeGet(Dialect::kValidated, &out, "k");
  EXPECT_EQ(out, std::string(1, '\3') + Bytes("k"));
  out.clear();
  EncodeAdd(Dialect::kValidated, &out, "k", -2);
  const int64_t minus_two = -2;
  EXPECT_EQ(out, std::string(1, '\4') + Bytes("k") +
                     std::string(reinterpret_cast<const char*>(&minus_two), 8));
  out.clear();
  EncodeWait(Dialect::kValidated, &out, {"a", "bc"});
  EXPECT_EQ(out, std::string(1, '\6') + U64(2) + Bytes("a") + Bytes("bc"));
  out.clear();
  EncodeMultiGet(Dialect::kValidated, &out, {"a"});
  EXPECT_EQ(out, std::string(1, '\x0a') + U64(1) + Bytes("a"));
}

TEST(RankSimFrames, LegacyHasNoHandshakeAndGetsKeyByKey) {
  std::string out;
  EncodeValidate(Dialect::kLegacy, &out);
  EXPECT_EQ(out, "");
  EncodeAdd(Dialect::kLegacy, &out, "k", 1);
  EXPECT_EQ(out[0], '\3');
  out.clear();
  EncodeWait(Dialect::kLegacy, &out, {"a"});
  EXPECT_EQ(out, std::string(1, '\5') + U64(1) + Bytes("a"));
  out.clear();
  EncodeMultiGet(Dialect::kLegacy, &out, {"a", "b"});
  EXPECT_EQ(out, std::string(1, '\2') + Bytes("a") + std::string(1, '\2') +
                     Bytes("b"));
}

TEST(RankSimAnswers, WaitForTheWholeAnswer) {
  Answer a;
  const std::string two = Bytes("xy") + Bytes("");
  for (size_t cut = 0; cut < two.size(); ++cut) {
    EXPECT_EQ(ParseAnswer({Expect::kValues, 2}, two.substr(0, cut), &a), 0u)
        << cut;
  }
  ASSERT_EQ(ParseAnswer({Expect::kValues, 2}, two + "next", &a), two.size());
  EXPECT_EQ(a.values, (std::vector<std::string>{"xy", ""}));
  EXPECT_EQ(ParseAnswer({Expect::kU8, 0}, "", &a), 0u);
  EXPECT_EQ(ParseAnswer({Expect::kU8, 0}, std::string(1, '\0'), &a), 1u);
  EXPECT_EQ(ParseAnswer({Expect::kI64, 0}, U64(7).substr(0, 7), &a), 0u);
  EXPECT_EQ(ParseAnswer({Expect::kI64, 0}, U64(7), &a), 8u);
  EXPECT_EQ(a.number, 7);
}

SimOptions Options(Pattern pattern, int ranks, int batch) {
  SimOptions o;
  o.pattern = pattern;
  o.ranks = ranks;
  o.batch = batch;
  o.prefix = "p/";
  return o;
}

Answer Number(int64_t n) {
  Answer a;
  a.number = n;
  return a;
}

TEST(RankSimBarrier, OnlyTheLastRankReleases) {
  std::string out;
  const SimOptions last_options = Options(Pattern::kBarrier, 3, 512);
  RankProgram last(last_options, 2);
  EXPECT_EQ(last.Start(&out).kind, Expect::kI64);
  EXPECT_NE(out.find("p/init/counter"), std::string::npos);
  out.clear();
  ASSERT_EQ(last.OnAnswer(Number(3), &out)->kind, Expect::kU8);
  EXPECT_EQ(out[0], '\1');  // the set of the released key, then the wait
  out.clear();
  const SimOptions early_options = Options(Pattern::kBarrier, 3, 512);
  RankProgram early(early_options, 0);
  early.Start(&out);
  out.clear();
  ASSERT_EQ(early.OnAnswer(Number(1), &out)->kind, Expect::kU8);
  EXPECT_EQ(out[0], '\6');
  EXPECT_EQ(early.OnAnswer(Answer(), &out)->kind, Expect::kNone);
}

TEST(RankSimBarrier, RejectsACountOutsideTheWorld) {
  std::string out;
  const SimOptions options = Options(Pattern::kBarrier, 3, 512);
  RankProgram p(options, 0);
  p.Start(&out);
  EXPECT_FALSE(p.OnAnswer(Number(4), &out).ok());
}

TEST(RankSimAnswers, AReusedAnswerHoldsOnlyTheLastValues) {
  Answer a;
  ASSERT_GT(
      ParseAnswer({Expect::kValues, 3},
                  Bytes("abc") + Bytes("d") + Bytes(std::string(40, 'e')), &a),
      0u);
  ASSERT_GT(ParseAnswer({Expect::kValues, 2}, Bytes("") + Bytes("f"), &a), 0u);
  EXPECT_EQ(a.values, (std::vector<std::string>{"", "f"}));
}

TEST(RankSimValues, IsRankValueMatchesWhatRankValueBuilds) {
  for (int rank : {0, 7, 25, 26, 12345}) {
    for (int bytes : {1, 10, 30, 100, 128}) {
      const std::string v = RankValue(rank, bytes);
      EXPECT_TRUE(IsRankValue(v, rank, bytes)) << rank << " " << bytes;
      // A value cut shorter than its rank's number says nothing of it.
      if (bytes >= 10) {
        EXPECT_FALSE(IsRankValue(v, rank + 1, bytes)) << rank << " " << bytes;
      }
    }
  }
  std::string v = RankValue(3, 100);
  EXPECT_FALSE(IsRankValue(v, 3, 99));
  EXPECT_FALSE(IsRankValue(v.substr(0, 99), 3, 100));
  v.back() = 'z';
  EXPECT_FALSE(IsRankValue(v, 3, 100));
  v = RankValue(3, 100);
  v[2] = 'X';
  EXPECT_FALSE(IsRankValue(v, 3, 100));
}

TEST(RankSimNccl, OthersGetTheIdRankZeroSet) {
  std::string out;
  const SimOptions options = Options(Pattern::kNccl, 2, 512);
  RankProgram p(options, 1);
  EXPECT_EQ(p.Start(&out).kind, Expect::kU8);
  Expect e = *p.OnAnswer(Answer(), &out);
  EXPECT_EQ(e.kind, Expect::kValues);
  Answer id;
  id.values = {RankValue(0, 128)};
  EXPECT_EQ(p.OnAnswer(id, &out)->kind, Expect::kNone);
  const SimOptions wrong_options = Options(Pattern::kNccl, 2, 512);
  RankProgram wrong(wrong_options, 1);
  wrong.Start(&out);
  ASSERT_TRUE(wrong.OnAnswer(Answer(), &out).ok());
  id.values = {RankValue(1, 128)};
  EXPECT_FALSE(wrong.OnAnswer(id, &out).ok());
}

TEST(RankSimAllgather, FetchesEveryOtherRankInBatches) {
  std::string out;
  const SimOptions options = Options(Pattern::kAllgather, 5, 2);
  RankProgram p(options, 1);
  EXPECT_EQ(p.Start(&out).kind, Expect::kU8);
  std::vector<std::vector<int>> batches = {{0, 2}, {3, 4}};
  for (size_t b = 0; b < batches.size(); ++b) {
    Expect e = *p.OnAnswer(Answer(), &out);  // the wait's answer
    ASSERT_EQ(e.kind, Expect::kValues);
    ASSERT_EQ(e.count, batches[b].size());
    Answer values;
    for (int r : batches[b]) values.values.push_back(RankValue(r, 100));
    e = *p.OnAnswer(values, &out);
    EXPECT_EQ(e.kind, b + 1 < batches.size() ? Expect::kU8 : Expect::kNone);
  }
}

TEST(RankSimPercentiles, AreNearestRank) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  const Percentiles p = ComputePercentiles(&samples);
  EXPECT_EQ(p.p50, 50);
  EXPECT_EQ(p.p99, 99);
  EXPECT_EQ(p.max, 100);
  std::vector<double> one = {3};
  EXPECT_EQ(ComputePercentiles(&one).p99, 3);
  std::vector<double> none;
  EXPECT_EQ(ComputePercentiles(&none).max, 0);
}

TEST(RankSimFlags, NameTheBadFlag) {
  EXPECT_TRUE(ParseFlags({"--port", "1", "--ranks", "2"}).ok());
  const auto message = [](std::vector<std::string> args) {
    return std::string(ParseFlags(args).status().message());
  };
  EXPECT_EQ(message({"--ranks", "2"}), "--port: required");
  EXPECT_NE(message({"--port", "1", "--ranks", "0"}).find("--ranks"),
            std::string::npos);
  EXPECT_NE(message({"--port", "1", "--ranks", "2", "--pattern", "x"})
                .find("--pattern"),
            std::string::npos);
  EXPECT_NE(
      message({"--port", "1", "--ranks", "2", "--nope", "1"}).find("--nope"),
      std::string::npos);
  EXPECT_NE(message({"--port", "1", "--ranks", "2", "--timeout-s"})
                .find("--timeout-s"),
            std::string::npos);
}

}  // namespace
}  // namespace ranksim
}  // namespace distjob
