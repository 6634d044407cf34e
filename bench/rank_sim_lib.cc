#include "bench/rank_sim_lib.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace distjob {
namespace ranksim {
namespace {

// The query types of each numbering: PyTorch 2.2+'s (TCPStoreBackend.hpp)
// and 1.13's (TCPStore.cpp), which has no VALIDATE and no MULTI_GET.
struct QueryTypes {
  uint8_t validate, set, get, add, wait, multi_get;
};
constexpr QueryTypes kValidatedTypes = {0, 1, 3, 4, 6, 10};
constexpr QueryTypes kLegacyTypes = {0xff, 0, 2, 3, 5, 0xff};

const QueryTypes& Types(Dialect d) {
  return d == Dialect::kLegacy ? kLegacyTypes : kValidatedTypes;
}
constexpr uint32_t kValidateMagic = 0x3C85F7CE;

constexpr char kCounterKey[] = "init/counter";
constexpr char kReleasedKey[] = "init/released";
constexpr char kNcclKey[] = "nccl/unique_id";
constexpr int kNcclIdBytes = 128;

template <typename T>
void AppendRaw(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendString(std::string* out, absl::string_view s) {
  AppendRaw<uint64_t>(out, s.size());
  out->append(s.data(), s.size());
}

template <typename T>
T ReadRaw(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// A flag's value as an integer in [lo, hi].
absl::Status ParseInt(const std::string& flag, const std::string& value,
                      int64_t lo, int64_t hi, int64_t* out) {
  if (!absl::SimpleAtoi(value, out) || *out < lo || *out > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": want an integer in [", lo, ", ", hi, "], got '", value, "'"));
  }
  return absl::OkStatus();
}

absl::Status ParsePattern(const std::string& value, Pattern* out) {
  static const std::map<std::string, Pattern> kPatterns = {
      {"barrier", Pattern::kBarrier},
      {"nccl", Pattern::kNccl},
      {"allgather", Pattern::kAllgather}};
  const auto it = kPatterns.find(value);
  if (it == kPatterns.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pattern: want barrier, nccl or allgather, got '", value, "'"));
  }
  *out = it->second;
  return absl::OkStatus();
}

absl::Status ParseDialect(const std::string& value, Dialect* out) {
  if (value != "validated" && value != "legacy") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dialect: want validated or legacy, got '", value, "'"));
  }
  *out = value == "legacy" ? Dialect::kLegacy : Dialect::kValidated;
  return absl::OkStatus();
}

// Sets one integer option; kMaxRanks bounds the counts so that products of
// them (keys of an all-gather) fit.
constexpr int64_t kMaxRanks = 1 << 20;
absl::Status SetIntFlag(const std::string& flag, const std::string& value,
                        SimOptions* o, bool* known) {
  struct IntFlag {
    int64_t lo, hi;
    std::function<void(int64_t)> set;
  };
  const std::map<std::string, IntFlag> flags = {
      {"--port", {1, 65535, [o](int64_t v) { o->port = v; }}},
      {"--ranks", {1, kMaxRanks, [o](int64_t v) { o->ranks = v; }}},
      {"--threads", {1, 64, [o](int64_t v) { o->threads = v; }}},
      {"--per-source", {1, 60000, [o](int64_t v) { o->per_source = v; }}},
      {"--max-connecting",
       {1, kMaxRanks, [o](int64_t v) { o->max_connecting = v; }}},
      {"--batch", {1, 4096, [o](int64_t v) { o->batch = v; }}},
      {"--value-bytes", {1, 1 << 20, [o](int64_t v) { o->value_bytes = v; }}},
      {"--timeout-s",
       {1, 3600, [o](int64_t v) { o->timeout = absl::Seconds(v); }}},
      {"--server-pid", {1, 1 << 30, [o](int64_t v) { o->server_pid = v; }}},
  };
  const auto it = flags.find(flag);
  *known = it != flags.end();
  if (!*known) return absl::OkStatus();
  int64_t v = 0;
  if (absl::Status s = ParseInt(flag, value, it->second.lo, it->second.hi, &v);
      !s.ok()) {
    return s;
  }
  it->second.set(v);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SimOptions> ParseFlags(const std::vector<std::string>& args) {
  SimOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--hold") {
      o.hold = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": needs a value"));
    }
    const std::string& value = args[++i];
    bool known = false;
    if (absl::Status s = SetIntFlag(flag, value, &o, &known); !s.ok()) {
      return s;
    }
    if (known) continue;
    if (flag == "--host") {
      o.host = value;
    } else if (flag == "--dialect") {
      if (absl::Status s = ParseDialect(value, &o.dialect); !s.ok()) return s;
    } else if (flag == "--prefix") {
      o.prefix = value;
    } else if (flag == "--pattern") {
      if (absl::Status s = ParsePattern(value, &o.pattern); !s.ok()) return s;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": unknown flag"));
    }
  }
  if (o.port == 0) return absl::InvalidArgumentError("--port: required");
  if (o.ranks == 0) return absl::InvalidArgumentError("--ranks: required");
  return o;
}

void EncodeValidate(Dialect d, std::string* out) {
  if (d == Dialect::kLegacy) return;
  AppendRaw<uint8_t>(out, Types(d).validate);
  AppendRaw<uint32_t>(out, kValidateMagic);
}

void EncodeSet(Dialect d, std::string* out, absl::string_view key,
               absl::string_view value) {
  AppendRaw<uint8_t>(out, Types(d).set);
  AppendString(out, key);
  AppendString(out, value);
}

void EncodeGet(Dialect d, std::string* out, absl::string_view key) {
  AppendRaw<uint8_t>(out, Types(d).get);
  AppendString(out, key);
}

void EncodeAdd(Dialect d, std::string* out, absl::string_view key,
               int64_t amount) {
  AppendRaw<uint8_t>(out, Types(d).add);
  AppendString(out, key);
  AppendRaw<int64_t>(out, amount);
}

void EncodeWait(Dialect d, std::string* out,
                const std::vector<std::string>& keys) {
  AppendRaw<uint8_t>(out, Types(d).wait);
  AppendRaw<uint64_t>(out, keys.size());
  for (const std::string& k : keys) AppendString(out, k);
}

void EncodeMultiGet(Dialect d, std::string* out,
                    const std::vector<std::string>& keys) {
  if (d == Dialect::kLegacy) {
    for (const std::string& k : keys) EncodeGet(d, out, k);
    return;
  }
  AppendRaw<uint8_t>(out, Types(d).multi_get);
  AppendRaw<uint64_t>(out, keys.size());
  for (const std::string& k : keys) AppendString(out, k);
}

size_t ParseAnswer(const Expect& expect, absl::string_view data, Answer* out) {
  switch (expect.kind) {
    case Expect::kNone:
      return 0;
    case Expect::kI64:
      if (data.size() < sizeof(int64_t)) return 0;
      out->number = ReadRaw<int64_t>(data.data());
      return sizeof(int64_t);
    case Expect::kU8:
      if (data.empty()) return 0;
      out->byte = static_cast<uint8_t>(data[0]);
      return 1;
    case Expect::kValues:
      break;
  }
  // Sized first, so that a partial answer is not copied once per read.
  size_t off = 0;
  for (size_t i = 0; i < expect.count; ++i) {
    if (data.size() - off < sizeof(uint64_t)) return 0;
    const uint64_t n = ReadRaw<uint64_t>(data.data() + off);
    off += sizeof(uint64_t);
    if (data.size() - off < n) return 0;
    off += n;
  }
  // Assigned into the strings `out` already holds: an all-gather reads
  // N² values, and an allocation each cost the simulator as much CPU as
  // the server spent answering them.
  out->values.resize(expect.count);
  off = 0;
  for (size_t i = 0; i < expect.count; ++i) {
    const uint64_t n = ReadRaw<uint64_t>(data.data() + off);
    out->values[i].assign(data.data() + off + sizeof(uint64_t), n);
    off += sizeof(uint64_t) + n;
  }
  return off;
}

std::string RankValue(int rank, int bytes) {
  std::string v = absl::StrCat("rank-", rank, "-10.0.0.1:29500-");
  v.resize(bytes, static_cast<char>('a' + rank % 26));
  return v;
}

bool IsRankValue(absl::string_view value, int rank, int bytes) {
  // RankValue(rank, bytes), checked in place rather than built for each
  // of an all-gather's N² values.
  char head[64];
  const int n =
      std::snprintf(head, sizeof(head), "rank-%d-10.0.0.1:29500-", rank);
  if (value.size() != static_cast<size_t>(bytes)) return false;
  const size_t len = std::min<size_t>(n, value.size());
  if (value.substr(0, len) != absl::string_view(head, len)) return false;
  const char fill = static_cast<char>('a' + rank % 26);
  for (size_t i = len; i < value.size(); ++i) {
    if (value[i] != fill) return false;
  }
  return true;
}

RankProgram::RankProgram(const SimOptions& o, int rank) : o_(&o), rank_(rank) {}

std::string RankProgram::Key(absl::string_view name, int rank) const {
  return rank < 0 ? absl::StrCat(o_->prefix, name)
                  : absl::StrCat(o_->prefix, name, rank);
}

Expect RankProgram::Start(std::string* out) {
  EncodeValidate(o_->dialect, out);
  switch (o_->pattern) {
    case Pattern::kBarrier:
      EncodeAdd(o_->dialect, out, Key(kCounterKey), 1);
      return {Expect::kI64, 0};
    case Pattern::kNccl:
      // Rank 0 waits for its own id too: its set has no answer, and the
      // wait's says the server holds it.
      if (rank_ == 0)
        EncodeSet(o_->dialect, out, Key(kNcclKey), RankValue(0, kNcclIdBytes));
      EncodeWait(o_->dialect, out, {Key(kNcclKey)});
      return {Expect::kU8, 0};
    case Pattern::kAllgather:
      EncodeSet(o_->dialect, out, Key("allgather/", rank_),
                RankValue(rank_, o_->value_bytes));
      return NextBatch(out);
  }
  return {};
}

// The next batch's wait (its answer is read next) and multi_get, which
// follows without waiting, as a client does once wait returns: here the
// wait's answer is read first, so the multi_get is sent after it.
Expect RankProgram::NextBatch(std::string* out) {
  batch_ranks_.clear();
  for (; next_ < o_->ranks && static_cast<int>(batch_ranks_.size()) < o_->batch;
       ++next_) {
    if (next_ != rank_) batch_ranks_.push_back(next_);
  }
  if (batch_ranks_.empty()) return {Expect::kNone, 0};
  std::vector<std::string> keys;
  for (int r : batch_ranks_) keys.push_back(Key("allgather/", r));
  EncodeWait(o_->dialect, out, keys);
  return {Expect::kU8, 0};
}

absl::Status RankProgram::CheckValues(const Answer& answer) const {
  for (size_t i = 0; i < answer.values.size(); ++i) {
    const int r = o_->pattern == Pattern::kNccl ? 0 : batch_ranks_[i];
    const int bytes =
        o_->pattern == Pattern::kNccl ? kNcclIdBytes : o_->value_bytes;
    if (!IsRankValue(answer.values[i], r, bytes)) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank_, ": wrong value for rank ", r, "'s key"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Expect> RankProgram::OnAnswer(const Answer& answer,
                                             std::string* out) {
  const int step = step_++;
  const bool wait_answer =
      (o_->pattern == Pattern::kBarrier && step == 1) ||
      (o_->pattern == Pattern::kNccl && step == 0) ||
      (o_->pattern == Pattern::kAllgather && step % 2 == 0);
  if (wait_answer && answer.byte != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank_, ": wait answered ",
                     static_cast<int>(answer.byte), ", not STOP_WAITING"));
  }
  switch (o_->pattern) {
    case Pattern::kBarrier:
      if (step == 1) return Expect{Expect::kNone, 0};
      if (answer.number < 1 || answer.number > o_->ranks) {
        return absl::FailedPreconditionError(
            absl::StrCat("rank ", rank_, ": add answered ", answer.number,
                         ", outside [1, ", o_->ranks, "]"));
      }
      // The last rank in releases everyone, as TCPStore's store barrier.
      if (answer.number == o_->ranks)
        EncodeSet(o_->dialect, out, Key(kReleasedKey), "1");
      EncodeWait(o_->dialect, out, {Key(kReleasedKey)});
      return Expect{Expect::kU8, 0};
    case Pattern::kNccl:
      if (step == 1) {
        if (absl::Status s = CheckValues(answer); !s.ok()) return s;
        return Expect{Expect::kNone, 0};
      }
      if (rank_ == 0) return Expect{Expect::kNone, 0};
      EncodeGet(o_->dialect, out, Key(kNcclKey));
      return Expect{Expect::kValues, 1};
    case Pattern::kAllgather:
      if (step % 2 == 0) {
        std::vector<std::string> keys;
        for (int r : batch_ranks_) keys.push_back(Key("allgather/", r));
        EncodeMultiGet(o_->dialect, out, keys);
        return Expect{Expect::kValues, batch_ranks_.size()};
      }
      if (absl::Status s = CheckValues(answer); !s.ok()) return s;
      return NextBatch(out);
  }
  return Expect{};
}

Percentiles ComputePercentiles(std::vector<double>* samples) {
  Percentiles p;
  if (samples->empty()) return p;
  std::sort(samples->begin(), samples->end());
  const auto at = [samples](double q) {
    const size_t n = samples->size();
    size_t i = static_cast<size_t>(std::ceil(q * n));
    i = std::clamp<size_t>(i, 1, n);
    return (*samples)[i - 1];
  };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  p.max = samples->back();
  return p;
}

}  // namespace ranksim
}  // namespace distjob
