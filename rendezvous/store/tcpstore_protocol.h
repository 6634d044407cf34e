// The request frames of PyTorch's TCPStore wire protocol, parsed without
// copying: a request is a one-byte query type and its fields, strings as a
// uint64 length (host byte order) and the bytes. Two numberings exist:
// 1.13's (SET = 0 ... WATCH_KEY = 7, DELETE_KEY = 8, checked by capturing
// a 1.13 client's bytes) and that of 2.x clients, which open with VALIDATE
// (0, magic 0x3C85F7CE) and renumber from SET = 1 (WATCH_KEY gone, PING
// and the queue operations added). A connection's first bytes tell which
// one it speaks (DetectDialect).
#ifndef DISTJOB_RENDEZVOUS_STORE_TCPSTORE_PROTOCOL_H_
#define DISTJOB_RENDEZVOUS_STORE_TCPSTORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace distjob {
namespace tcpstore {

constexpr uint32_t kValidateMagic = 0x3C85F7CE;

enum class Dialect : uint8_t {
  kUnknown,    // too few bytes to tell yet
  kLegacy,     // 1.13 (and 2.x before the VALIDATE handshake)
  kValidated,  // 2.x clients that send VALIDATE first
};

// Our own numbering of every operation either dialect has.
enum class Op : uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
  kCount,
};
const char* OpName(Op op);

// One-byte answers of CHECK and of WAIT/CANCEL_WAIT.
constexpr uint8_t kReady = 0;
constexpr uint8_t kNotReady = 1;
constexpr uint8_t kStopWaiting = 0;
constexpr uint8_t kWaitCanceled = 1;

struct ParseLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  size_t max_keys_per_request = 4096;
  size_t max_frame_bytes = size_t{64} << 20;
};

// A parsed request. The views point into the parsed bytes and are valid as
// long as they are.
struct Request {
  Op op = Op::kCount;
  std::vector<absl::string_view> keys;
  // set/append/queue_push: the value; compare_set: expected, desired;
  // multi_set: one per key.
  std::vector<absl::string_view> values;
  int64_t number = 0;  // add: the amount; barrier: the world size
  uint32_t word = 0;   // validate: the magic; ping: the nonce
};

struct ParseResult {
  enum Kind { kRequest, kNeedMore, kError } kind = kError;
  // kRequest: the frame's length; kNeedMore: at least this many bytes are
  // needed before parsing again (more than were given).
  size_t bytes = 0;
  std::string error;  // kError: what is wrong, naming the limit if one
};

// The dialect of a connection whose first bytes are `data`; kUnknown
// while fewer than 5 bytes start with a 0.
Dialect DetectDialect(absl::string_view data);

// Parses the request at the start of `data`. A frame over a limit, or an
// unknown query type, is kError as soon as its header shows it, so a
// client cannot make the server buffer an oversized frame.
ParseResult Parse(Dialect dialect, absl::string_view data,
                  const ParseLimits& limits, Request* out);

// The query type (the frame's first byte) of `op` in `dialect`, as a
// client sends it; kNoQueryType when that dialect lacks the operation
// (2.x has no WATCH_KEY, 1.13 no PING). For clients: tests and benches.
constexpr uint8_t kNoQueryType = 0xff;
uint8_t QueryType(Dialect dialect, Op op);

// Answers, appended to a connection's output.
void AppendU8(std::string* out, uint8_t v);
void AppendU32(std::string* out, uint32_t v);
void AppendI64(std::string* out, int64_t v);
void AppendBytes(std::string* out, absl::string_view bytes);

// std::stoll as TCPStore's ADD applies it to the stored value: leading
// white space, a sign, at least one digit, anything after ignored. False
// when it throws (no digits, out of range).
bool ParseStoredInt(absl::string_view s, int64_t* out);

}  // namespace tcpstore
}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_TCPSTORE_PROTOCOL_H_
