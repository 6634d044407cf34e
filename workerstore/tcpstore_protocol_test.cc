#include "workerstore/tcpstore_protocol.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace distjob {
namespace tcpstore {
namespace {

std::string U64(uint64_t v) {
  return std::string(reinterpret_cast<char*>(&v), 8);
}
std::string Str(const std::string& s) { return U64(s.size()) + s; }
std::string Magic() {
  uint32_t m = kValidateMagic;
  return std::string(1, '\0') + std::string(reinterpret_cast<char*>(&m), 4);
}

TEST(TcpStoreProtocolTest, DetectsTheDialectFromTheFirstBytes) {
  EXPECT_EQ(DetectDialect(""), Dialect::kUnknown);
  EXPECT_EQ(DetectDialect(std::string("\x06", 1)), Dialect::kLegacy);
  EXPECT_EQ(DetectDialect(std::string("\0\x01", 2)), Dialect::kUnknown);
  EXPECT_EQ(DetectDialect(Magic()), Dialect::kValidated);
  // A 1.13 SET of a one-byte key.
  EXPECT_EQ(DetectDialect(std::string(1, '\0') + Str("k")), Dialect::kLegacy);
}

// The query types clients send, as captured from each dialect's clients.
TEST(TcpStoreProtocolTest, QueryTypesAreTheWireNumbers) {
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kSet), 0);
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kGet), 2);
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kAdd), 3);
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kNumKeys), 6);
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kWatchKey), 7);
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kDeleteKey), 8);
  EXPECT_EQ(QueryType(Dialect::kLegacy, Op::kPing), kNoQueryType);
  EXPECT_EQ(QueryType(Dialect::kLegacyNoWatch, Op::kDeleteKey), 7);
  EXPECT_EQ(QueryType(Dialect::kLegacyNoWatch, Op::kAppend), 8);
  EXPECT_EQ(QueryType(Dialect::kLegacyNoWatch, Op::kCancelWait), 11);
  EXPECT_EQ(QueryType(Dialect::kLegacyNoWatch, Op::kWatchKey), kNoQueryType);
  EXPECT_EQ(QueryType(Dialect::kUnknown, Op::kSet), kNoQueryType);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kValidate), 0);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kSet), 1);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kDeleteKey), 8);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kCancelWait), 12);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kPing), 13);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kListKeys), 17);
  EXPECT_EQ(QueryType(Dialect::kValidated, Op::kWatchKey), kNoQueryType);
}

TEST(TcpStoreProtocolTest, NumbersOpsPerDialect) {
  Request r;
  const std::string set = Str("/k") + Str("v");
  const std::string legacy_set = std::string(1, '\0') + set;
  ParseResult p = Parse(Dialect::kLegacy, legacy_set, {}, &r);
  ASSERT_EQ(p.kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kSet);
  EXPECT_EQ(p.bytes, 1 + set.size());
  ASSERT_EQ(r.keys.size(), 1u);
  EXPECT_EQ(r.keys[0], "/k");
  EXPECT_EQ(r.values[0], "v");
  const std::string validated_set = std::string(1, '\1') + set;
  p = Parse(Dialect::kValidated, validated_set, {}, &r);
  ASSERT_EQ(p.kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kSet);
  // 1.13: 7 is WATCH_KEY, 8 DELETE_KEY; 2.x: 7 GETNUMKEYS, 8 DELETE_KEY.
  ASSERT_EQ(Parse(Dialect::kLegacy, "\x07" + Str("/k"), {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kWatchKey);
  ASSERT_EQ(Parse(Dialect::kValidated, "\x07", {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kNumKeys);
  ASSERT_EQ(Parse(Dialect::kLegacy, "\x06", {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kNumKeys);
  ASSERT_EQ(Parse(Dialect::kValidated, "\x0d\x01\x02\x03\x04", {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kPing);
  EXPECT_EQ(r.word, 0x04030201u);
  ASSERT_EQ(Parse(Dialect::kValidated, Magic(), {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kValidate);
  EXPECT_EQ(r.word, kValidateMagic);
}

TEST(TcpStoreProtocolTest, ParsesMultiKeyRequests) {
  Request r;
  const std::string multi_set =
      "\x0b" + U64(2) + Str("/a") + Str("1") + Str("/b") + Str("22");
  ASSERT_EQ(Parse(Dialect::kValidated, multi_set, {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kMultiSet);
  ASSERT_EQ(r.keys.size(), 2u);
  EXPECT_EQ(r.keys[1], "/b");
  EXPECT_EQ(r.values[1], "22");
  const std::string wait = "\x05" + U64(2) + Str("/a") + Str("/b");
  ASSERT_EQ(Parse(Dialect::kLegacy, wait, {}, &r).kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kWait);
  EXPECT_EQ(r.keys.size(), 2u);
  std::string add = "\x03" + Str("/n");
  int64_t amount = -3;
  add.append(reinterpret_cast<char*>(&amount), 8);
  ASSERT_EQ(Parse(Dialect::kLegacy, add, {}, &r).kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kAdd);
  EXPECT_EQ(r.number, -3);
}

TEST(TcpStoreProtocolTest, TruncatedFramesAskForTheMissingBytes) {
  const std::string frame = "\x01" + Str("/key") + Str("expected") + Str("new");
  Request r;
  for (size_t n = 0; n < frame.size(); ++n) {
    const ParseResult p = Parse(Dialect::kLegacy, frame.substr(0, n), {}, &r);
    ASSERT_EQ(p.kind, ParseResult::kNeedMore) << n;
    EXPECT_GT(p.bytes, n);
    EXPECT_LE(p.bytes, frame.size());
  }
  EXPECT_EQ(Parse(Dialect::kLegacy, frame, {}, &r).kind, ParseResult::kRequest);
}

TEST(TcpStoreProtocolTest, RejectsOversizedFieldsFromTheirHeader) {
  ParseLimits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_keys_per_request = 2;
  limits.max_frame_bytes = 50;
  Request r;
  ParseResult p = Parse(Dialect::kLegacy, "\x02" + U64(9), limits, &r);
  ASSERT_EQ(p.kind, ParseResult::kError);
  EXPECT_NE(p.error.find("max_key_bytes 8"), std::string::npos) << p.error;
  p = Parse(Dialect::kLegacy, std::string(1, '\0') + Str("/k") + U64(17),
            limits, &r);
  ASSERT_EQ(p.kind, ParseResult::kError);
  EXPECT_NE(p.error.find("max_value_bytes 16"), std::string::npos) << p.error;
  p = Parse(Dialect::kLegacy, "\x05" + U64(3), limits, &r);
  ASSERT_EQ(p.kind, ParseResult::kError);
  EXPECT_NE(p.error.find("max_keys_per_request 2"), std::string::npos);
  // A second 16-byte value makes the frame 59 bytes: over 50.
  p = Parse(Dialect::kLegacy,
            "\x01" + Str("/k") + Str(std::string(16, 'a')) + U64(16), limits,
            &r);
  ASSERT_EQ(p.kind, ParseResult::kError);
  EXPECT_NE(p.error.find("max_frame_bytes 50"), std::string::npos) << p.error;
  // A length near 2^64 is no overflow.
  p = Parse(Dialect::kLegacy, "\x02" + U64(~uint64_t{0}), {}, &r);
  EXPECT_EQ(p.kind, ParseResult::kError);
}

// Byte layouts as PyTorch's clients build them (tcpstore_protocol.h names
// the sources): 2.1 has 1.13's numbering less WATCH_KEY and no VALIDATE.
TEST(TcpStoreProtocolTest, Reads21NumberingOnceAConnectionShowsIt) {
  Request r;
  // 9..11 exist in 2.1 only: MULTI_GET, MULTI_SET, CANCEL_WAIT.
  const std::string multi_get = "\x09" + U64(2) + Str("/a") + Str("/b");
  ASSERT_EQ(Parse(Dialect::kLegacy, multi_get, {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kMultiGet);
  ASSERT_EQ(r.keys.size(), 2u);
  const std::string multi_set = "\x0a" + U64(1) + Str("/a") + Str("v");
  ASSERT_EQ(Parse(Dialect::kLegacy, multi_set, {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kMultiSet);
  ASSERT_EQ(Parse(Dialect::kLegacy, "\x0b", {}, &r).kind,
            ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kCancelWait);
  EXPECT_EQ(Parse(Dialect::kLegacy, "\x0c", {}, &r).kind, ParseResult::kError);
  // Until then 7 and 8 are 1.13's; after, 2.1's DELETE_KEY and APPEND.
  EXPECT_EQ(Refine(Dialect::kLegacy, Op::kSet), Dialect::kLegacy);
  EXPECT_EQ(Refine(Dialect::kLegacy, Op::kDeleteKey), Dialect::kLegacy);
  EXPECT_EQ(Refine(Dialect::kValidated, Op::kCancelWait), Dialect::kValidated);
  const Dialect d21 = Refine(Dialect::kLegacy, Op::kCancelWait);
  EXPECT_EQ(d21, Dialect::kLegacyNoWatch);
  ASSERT_EQ(Parse(d21, "\x07" + Str("/k"), {}, &r).kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kDeleteKey);
  const std::string append = "\x08" + Str("/k") + Str("v");
  const ParseResult p = Parse(d21, append, {}, &r);
  ASSERT_EQ(p.kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kAppend);
  EXPECT_EQ(p.bytes, append.size());
  ASSERT_EQ(Parse(d21, "\x0b", {}, &r).kind, ParseResult::kRequest);
  EXPECT_EQ(r.op, Op::kCancelWait);
  EXPECT_EQ(Parse(d21, "\x0c", {}, &r).kind, ParseResult::kError);
}

// 2.2 and later: VALIDATE 0, then SET 1 ... CANCEL_WAIT 12, PING 13 (a
// uint32 nonce), QUEUE_PUSH 14, QUEUE_POP 15, QUEUE_LEN 16.
TEST(TcpStoreProtocolTest, ReadsTheValidatedNumbering) {
  Request r;
  const struct {
    uint8_t byte;
    Op op;
  } kWire[] = {
      {8, Op::kDeleteKey},  {9, Op::kAppend},      {10, Op::kMultiGet},
      {11, Op::kMultiSet},  {12, Op::kCancelWait}, {13, Op::kPing},
      {14, Op::kQueuePush}, {15, Op::kQueuePop},   {16, Op::kQueueLen}};
  for (const auto& w : kWire) {
    std::string frame(1, static_cast<char>(w.byte));
    switch (w.op) {
      case Op::kDeleteKey:
      case Op::kQueuePop:
      case Op::kQueueLen:
        frame += Str("/k");
        break;
      case Op::kAppend:
      case Op::kQueuePush:
        frame += Str("/k") + Str("v");
        break;
      case Op::kMultiGet:
        frame += U64(1) + Str("/k");
        break;
      case Op::kMultiSet:
        frame += U64(1) + Str("/k") + Str("v");
        break;
      case Op::kPing:
        frame += "\x01\x02\x03\x04";
        break;
      default:
        break;
    }
    const ParseResult p = Parse(Dialect::kValidated, frame, {}, &r);
    ASSERT_EQ(p.kind, ParseResult::kRequest) << int{w.byte};
    EXPECT_EQ(r.op, w.op) << int{w.byte};
    EXPECT_EQ(p.bytes, frame.size()) << int{w.byte};
  }
}

TEST(TcpStoreProtocolTest, RejectsUnknownQueryTypes) {
  Request r;
  EXPECT_EQ(Parse(Dialect::kLegacy, "\x0d", {}, &r).kind, ParseResult::kError);
  const ParseResult p = Parse(Dialect::kValidated, "\xff", {}, &r);
  ASSERT_EQ(p.kind, ParseResult::kError);
  EXPECT_NE(p.error.find("unknown query type 255"), std::string::npos);
}

TEST(TcpStoreProtocolTest, ParsesStoredIntegersAsStoll) {
  int64_t v = 0;
  EXPECT_TRUE(ParseStoredInt("42", &v));
  EXPECT_EQ(v, 42);
  EXPECT_TRUE(ParseStoredInt("  -7xyz", &v));
  EXPECT_EQ(v, -7);
  EXPECT_TRUE(ParseStoredInt("+3", &v));
  EXPECT_EQ(v, 3);
  EXPECT_TRUE(ParseStoredInt("-9223372036854775808", &v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_TRUE(ParseStoredInt("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(ParseStoredInt("9223372036854775808", &v));
  EXPECT_FALSE(ParseStoredInt("", &v));
  EXPECT_FALSE(ParseStoredInt("abc", &v));
  EXPECT_FALSE(ParseStoredInt("-", &v));
}

TEST(TcpStoreProtocolTest, EncodesAnswersInHostOrder) {
  std::string out;
  AppendBytes(&out, "ab");
  AppendI64(&out, 5);
  AppendU8(&out, kWaitCanceled);
  EXPECT_EQ(out, Str("ab") + U64(5) + "\x01");
}

}  // namespace
}  // namespace tcpstore
}  // namespace distjob
