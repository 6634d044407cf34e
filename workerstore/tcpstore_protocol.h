// The request frames of PyTorch's TCPStore wire protocol, parsed without
// copying: a request is a one-byte query type and its fields, strings as a
// uint64 length (host byte order) and the bytes. A connection's first
// bytes tell which numbering it speaks (DetectDialect).
//
// The numberings, as read in PyTorch's own sources (torch/csrc/distributed/
// c10d/, through the search index of public repositories; release tags are
// not stored there, so each state is placed by its pull request's date):
// - 1.13 and 2.0 (kLegacy): SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4,
//   WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8. Read in TCPStore.cpp
//   of a 1.13.0a0 tree (Creativity-Spot/pytorch@bee00bab); 2.0 was released
//   before APPEND and the rest were added (pytorch PR #100383, May 2023).
// - 2.1 (kLegacyNoWatch): WATCH_KEY removed (PR #105014, merged
//   2023-07-21), so DELETE_KEY 7, APPEND 8, MULTI_GET 9, MULTI_SET 10,
//   CANCEL_WAIT 11, and no VALIDATE yet: read in TCPStoreBackend.hpp of
//   pytorch/pytorch@3a67b827, which already has the libuv backend (PR
//   #105672, 2023-07-25). The main-branch state in between (WATCH_KEY 7
//   with APPEND 9 ... CANCEL_WAIT 12, pytorch/pytorch@b8744784) was in no
//   release. Whether 2.1.0 (October 2023) already took VALIDATE (PR
//   #107607, opened 2023-08-21) could not be read from a tagged file; if
//   it did, its clients are served as kValidated below. Such a client
//   sends nothing that tells it from a 1.13 one until it uses 9..11, which
//   only it has: from then on its 7 and 8 are DELETE_KEY and APPEND
//   (Refine).
// - 2.2 and later (kValidated; 2.2.1 took a Windows fix of this flow, PR
//   #119769): the first request is VALIDATE 0 with the uint32 0x3C85F7CE
//   (PR #107607; its final form, read in
//   TCPStoreBackend.cpp, checks it once per connection, with no magic
//   before each request: a draft with one, pytorch/pytorch@00321a02, did
//   not land), then SET 1 ... GETNUMKEYS 7, DELETE_KEY 8, APPEND 9,
//   MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12 (pytorch/pytorch@0278b21),
//   PING 13 with a uint32 nonce echoed back (PR #129985, July 2024;
//   cyyever/pytorch@c904705), QUEUE_PUSH 14, QUEUE_POP 15, QUEUE_LEN 16
//   (ROCm/pytorch@4075646), LIST_KEYS 17. PyTorch 2.11's installed
//   TCPStoreBackend.hpp (read by tests/device/check.sh's `sources` step,
//   2026-11-27) has exactly VALIDATE 0 ... LIST_KEYS 17, the magic above
//   and the one-byte CHECK and WAIT answers below, and its clients passed
//   the method-by-method comparison with its own server. BARRIER 18 (key,
//   int64 world size) is from newer sources not seen in a release; no 2.11
//   client sends it.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_PROTOCOL_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace distjob {
namespace tcpstore {

constexpr uint32_t kValidateMagic = 0x3C85F7CE;

enum class Dialect : uint8_t {
  kUnknown,        // too few bytes to tell yet
  kLegacy,         // 1.13 and 2.0
  kLegacyNoWatch,  // 2.1: 1.13's numbering less WATCH_KEY, no VALIDATE
  kValidated,      // 2.2 and later: VALIDATE first
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

// The dialect of a kLegacy connection once it sent `op`: a query type only
// 2.1 has (MULTI_GET, MULTI_SET, CANCEL_WAIT) makes it kLegacyNoWatch.
Dialect Refine(Dialect dialect, Op op);

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

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_PROTOCOL_H_
