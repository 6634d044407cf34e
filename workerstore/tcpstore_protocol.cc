#include "workerstore/tcpstore_protocol.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace distjob {
namespace tcpstore {
namespace {

// Wire byte -> Op, per dialect (tcpstore_protocol.h says where each
// numbering was read). 9..11 exist in 2.1 only, so kLegacy reads them as
// 2.1 does.
constexpr Op kLegacyOps[] = {
    Op::kSet,       Op::kCompareSet, Op::kGet,      Op::kAdd,
    Op::kCheck,     Op::kWait,       Op::kNumKeys,  Op::kWatchKey,
    Op::kDeleteKey, Op::kMultiGet,   Op::kMultiSet, Op::kCancelWait,
};
constexpr Op kLegacyNoWatchOps[] = {
    Op::kSet,    Op::kCompareSet, Op::kGet,      Op::kAdd,
    Op::kCheck,  Op::kWait,       Op::kNumKeys,  Op::kDeleteKey,
    Op::kAppend, Op::kMultiGet,   Op::kMultiSet, Op::kCancelWait,
};
constexpr Op kValidatedOps[] = {
    Op::kValidate,   Op::kSet,      Op::kCompareSet, Op::kGet,
    Op::kAdd,        Op::kCheck,    Op::kWait,       Op::kNumKeys,
    Op::kDeleteKey,  Op::kAppend,   Op::kMultiGet,   Op::kMultiSet,
    Op::kCancelWait, Op::kPing,     Op::kQueuePush,  Op::kQueuePop,
    Op::kQueueLen,   Op::kListKeys, Op::kBarrier,
};

// A dialect's query types, indexed by the byte on the wire (none for
// kUnknown).
absl::Span<const Op> Table(Dialect dialect) {
  switch (dialect) {
    case Dialect::kValidated:
      return kValidatedOps;
    case Dialect::kLegacyNoWatch:
      return kLegacyNoWatchOps;
    case Dialect::kLegacy:
      return kLegacyOps;
    default:
      return {};
  }
}

}  // namespace

uint8_t QueryType(Dialect dialect, Op op) {
  const absl::Span<const Op> table = Table(dialect);
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] == op) return static_cast<uint8_t>(i);
  }
  return kNoQueryType;
}

namespace {

class Cursor {
 public:
  Cursor(absl::string_view data, const ParseLimits& limits)
      : data_(data), limits_(limits) {}

  // False with need_ set when the bytes have not all arrived, or with
  // error_ set when they never may.
  bool Take(size_t n, const char** p) {
    if (n > limits_.max_frame_bytes - pos_) {
      error_ =
          absl::StrCat("frame over max_frame_bytes ", limits_.max_frame_bytes);
      return false;
    }
    if (n > data_.size() - pos_) {
      need_ = pos_ + n;
      return false;
    }
    *p = data_.data() + pos_;
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Value(T* v) {
    const char* p;
    if (!Take(sizeof(T), &p)) return false;
    std::memcpy(v, p, sizeof(T));
    return true;
  }
  bool Bytes(size_t max, const char* what, const char* limit,
             absl::string_view* out) {
    uint64_t n;
    if (!Value(&n)) return false;
    if (n > max) {
      error_ = absl::StrCat(what, " of ", n, " bytes over ", limit, " ", max);
      return false;
    }
    const char* p;
    if (!Take(n, &p)) return false;
    *out = absl::string_view(p, n);
    return true;
  }
  bool Key(std::vector<absl::string_view>* keys) {
    absl::string_view k;
    if (!Bytes(limits_.max_key_bytes, "key", "max_key_bytes", &k)) {
      return false;
    }
    keys->push_back(k);
    return true;
  }
  bool Val(std::vector<absl::string_view>* values) {
    absl::string_view v;
    if (!Bytes(limits_.max_value_bytes, "value", "max_value_bytes", &v)) {
      return false;
    }
    values->push_back(v);
    return true;
  }
  bool Count(uint64_t* n) {
    if (!Value(n)) return false;
    if (*n > limits_.max_keys_per_request) {
      error_ =
          absl::StrCat(*n, " keys in one request over max_keys_per_request ",
                       limits_.max_keys_per_request);
      return false;
    }
    return true;
  }

  size_t pos() const { return pos_; }
  size_t need() const { return need_; }
  std::string& error() { return error_; }

 private:
  absl::string_view data_;
  const ParseLimits& limits_;
  size_t pos_ = 0;
  size_t need_ = 0;
  std::string error_;
};

bool ParseFields(Cursor& c, Request* r) {
  uint64_t n = 0;
  switch (r->op) {
    case Op::kValidate:
    case Op::kPing:
      return c.Value(&r->word);
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      return c.Key(&r->keys) && c.Val(&r->values);
    case Op::kCompareSet:
      return c.Key(&r->keys) && c.Val(&r->values) && c.Val(&r->values);
    case Op::kGet:
    case Op::kDeleteKey:
    case Op::kWatchKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      return c.Key(&r->keys);
    case Op::kAdd:
    case Op::kBarrier:
      return c.Key(&r->keys) && c.Value(&r->number);
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      if (!c.Count(&n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!c.Key(&r->keys)) return false;
      }
      return true;
    case Op::kMultiSet:
      if (!c.Count(&n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!c.Key(&r->keys) || !c.Val(&r->values)) return false;
      }
      return true;
    case Op::kNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys:
    case Op::kCount:
      return true;
  }
  return true;
}

}  // namespace

const char* OpName(Op op) {
  static constexpr const char* kNames[] = {
      "validate",   "set",       "compare_set", "get",         "add",
      "check",      "wait",      "num_keys",    "watch_key",   "delete_key",
      "append",     "multi_get", "multi_set",   "cancel_wait", "ping",
      "queue_push", "queue_pop", "queue_len",   "list_keys",   "barrier",
      "unknown",
  };
  return kNames[static_cast<size_t>(op)];
}

Dialect DetectDialect(absl::string_view data) {
  if (data.empty()) return Dialect::kUnknown;
  if (data[0] != 0) return Dialect::kLegacy;
  // A 1.13 SET (0) is followed by a uint64 key length; one whose low half
  // is the magic is over any key limit, so the two cannot be confused.
  if (data.size() < 1 + sizeof(uint32_t)) return Dialect::kUnknown;
  uint32_t magic;
  std::memcpy(&magic, data.data() + 1, sizeof(magic));
  return magic == kValidateMagic ? Dialect::kValidated : Dialect::kLegacy;
}

Dialect Refine(Dialect dialect, Op op) {
  if (dialect == Dialect::kLegacy &&
      (op == Op::kMultiGet || op == Op::kMultiSet || op == Op::kCancelWait)) {
    return Dialect::kLegacyNoWatch;
  }
  return dialect;
}

ParseResult Parse(Dialect dialect, absl::string_view data,
                  const ParseLimits& limits, Request* out) {
  ParseResult res;
  if (data.empty()) {
    res.kind = ParseResult::kNeedMore;
    res.bytes = 1;
    return res;
  }
  const auto type = static_cast<uint8_t>(data[0]);
  const absl::Span<const Op> table = Table(dialect);
  if (type >= table.size()) {
    res.error = absl::StrCat("unknown query type ", type);
    return res;
  }
  out->op = table[type];
  out->keys.clear();
  out->values.clear();
  out->number = 0;
  out->word = 0;
  Cursor c(data.substr(1), limits);
  if (ParseFields(c, out)) {
    res.kind = ParseResult::kRequest;
    res.bytes = 1 + c.pos();
  } else if (!c.error().empty()) {
    res.error = absl::StrCat(OpName(out->op), ": ", c.error());
  } else {
    res.kind = ParseResult::kNeedMore;
    res.bytes = 1 + c.need();
  }
  return res;
}

void AppendU8(std::string* out, uint8_t v) {
  out->push_back(static_cast<char>(v));
}

void AppendU32(std::string* out, uint32_t v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendI64(std::string* out, int64_t v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendBytes(std::string* out, absl::string_view bytes) {
  const uint64_t n = bytes.size();
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(bytes.data(), bytes.size());
}

bool ParseStoredInt(absl::string_view s, int64_t* out) {
  size_t i = 0;
  // std::isspace in the C locale.
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) ++i;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  const size_t first = i;
  // Accumulated negatively so that INT64_MIN parses.
  int64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const int digit = s[i] - '0';
    if (v < (std::numeric_limits<int64_t>::min() + digit) / 10) return false;
    v = v * 10 - digit;
  }
  if (i == first) return false;
  if (!negative) {
    if (v == std::numeric_limits<int64_t>::min()) return false;
    v = -v;
  }
  *out = v;
  return true;
}

}  // namespace tcpstore
}  // namespace distjob
