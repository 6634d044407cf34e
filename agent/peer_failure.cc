#include "agent/peer_failure.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/logging.h"
#include "common/text.h"

namespace distjob {
namespace {

// What one text field of an offer may hold: a traceback's last lines fit.
constexpr size_t kMaxFieldBytes = 4096;

std::string Cut(const std::string& text) {
  return ValidUtf8(absl::string_view(text).substr(0, kMaxFieldBytes));
}

// A peer's text as our console may print it: cut, valid UTF-8, and every
// control byte escaped as OneLine does (a traceback keeps its line breaks
// and tabs), so that no peer moves the cursor, recolours the console or
// forges a line of ours.
std::string Printable(const std::string& text, bool lines) {
  const std::string cut = Cut(text);
  if (!lines) return OneLine(cut, kMaxFieldBytes);
  std::vector<std::string> kept;
  for (absl::string_view line : absl::StrSplit(cut, '\n')) {
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, '\t')) {
      cells.push_back(OneLine(cell, kMaxFieldBytes));
    }
    kept.push_back(absl::StrJoin(cells, "\t"));
  }
  return absl::StrJoin(kept, "\n");
}

enum class Text { kLine, kLines };

bool ReadString(const Json& j, const char* key, std::string* out,
                Text text = Text::kLine) {
  auto it = j.find(key);
  if (it == j.end()) return true;  // absent: left empty
  if (!it->is_string()) return false;
  *out = Printable(it->get<std::string>(), text == Text::kLines);
  return true;
}

bool ReadInt64(const Json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}

bool ReadInt(const Json& j, const char* key, int* out) {
  int64_t v = *out;
  if (!ReadInt64(j, key, &v) || v < INT32_MIN || v > INT32_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ReadBool(const Json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

}  // namespace

std::string EncodeOfferedFailure(const FailureReport& f) {
  Json j;
  j["rank"] = f.rank;
  j["host"] = Cut(f.host);
  j["local_rank"] = f.exit.local_rank;
  j["pid"] = f.exit.pid;
  j["exit_code"] = f.exit_code;
  j["worker_exit_code"] = f.exit.exit_code;
  j["term_signal"] = f.exit.term_signal;
  j["time_us"] = absl::ToUnixMicros(f.exit.time);
  j["restart"] = f.cause.restart;
  j["infrastructure"] = f.cause.infrastructure;
  j["peer_communication"] = f.cause.peer_communication;
  j["rule"] = Cut(f.cause.rule);
  j["exception_type"] = Cut(f.cause.exception.type);
  j["exception"] = Cut(f.cause.exception.line);
  j["traceback"] = Cut(f.cause.exception.excerpt);
  j["signature"] = Cut(f.signature);
  j["logs"] = Cut(f.logs);
  j["hint"] = Cut(f.hint);
  return DumpJson(j);
}

absl::StatusOr<FailureReport> DecodeOfferedFailure(absl::string_view text) {
  auto parsed = ParseJson(text, "an offered failure");
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  FailureReport f;
  f.from_peer = true;
  int pid = -1;
  int64_t time_us = 0;
  const bool ok =
      j.is_object() && ReadInt(j, "rank", &f.rank) &&
      ReadString(j, "host", &f.host) &&
      ReadInt(j, "local_rank", &f.exit.local_rank) && ReadInt(j, "pid", &pid) &&
      ReadInt64(j, "time_us", &time_us) &&
      ReadInt(j, "exit_code", &f.exit_code) &&
      ReadInt(j, "worker_exit_code", &f.exit.exit_code) &&
      ReadInt(j, "term_signal", &f.exit.term_signal) &&
      ReadBool(j, "restart", &f.cause.restart) &&
      ReadBool(j, "infrastructure", &f.cause.infrastructure) &&
      ReadBool(j, "peer_communication", &f.cause.peer_communication) &&
      ReadString(j, "rule", &f.cause.rule) &&
      ReadString(j, "exception_type", &f.cause.exception.type) &&
      ReadString(j, "exception", &f.cause.exception.line) &&
      ReadString(j, "traceback", &f.cause.exception.excerpt, Text::kLines) &&
      ReadString(j, "signature", &f.signature) &&
      ReadString(j, "logs", &f.logs) && ReadString(j, "hint", &f.hint);
  if (!ok) {
    return absl::InvalidArgumentError(
        "an offered failure has a field of the wrong type");
  }
  f.exit.pid = pid;
  f.exit.time = absl::FromUnixMicros(time_us);
  return f;
}

namespace {

// The failure another node offered as `kind`, if it decodes (said once
// when it does not: `*warned`; a peer's bytes are no verdict).
std::optional<FailureReport> Offered(ElasticRendezvous& rendezvous,
                                     OfferedFailureKind kind, bool* warned) {
  std::optional<std::string> offered = rendezvous.OfferedFailure(kind);
  if (!offered.has_value()) return std::nullopt;
  absl::StatusOr<FailureReport> failure = DecodeOfferedFailure(*offered);
  if (!failure.ok()) {
    if (!std::exchange(*warned, true)) {
      DJ_LOG_WARNING("ignoring the failure another node offered: {}",
                     failure.status().message());
    }
    return std::nullopt;
  }
  return *std::move(failure);
}

// The failure another node offered as the root cause, if it is one: a
// communication error offered as one is collateral too.
std::optional<FailureReport> OfferedRootCause(ElasticRendezvous& rendezvous,
                                              bool* warned) {
  std::optional<FailureReport> failure =
      Offered(rendezvous, OfferedFailureKind::kRootCause, warned);
  if (failure.has_value() && failure->cause.peer_communication) {
    return std::nullopt;
  }
  return failure;
}

}  // namespace

PeerVerdict AwaitPeerVerdict(ElasticRendezvous& rendezvous,
                             const FailureReport& own,
                             const std::function<bool(absl::Duration)>& sleep) {
  const absl::Duration window = rendezvous.PeerLossWindow();
  const absl::Time until = absl::Now() + window;
  DJ_LOG_INFO(
      "rank {} failed with {}: waiting up to {} for the rendezvous to see "
      "whether a peer was lost, or another node's worker failed first, "
      "before deciding",
      own.rank, own.cause.rule, absl::FormatDuration(window));
  absl::Time next_note = absl::Now() + absl::Seconds(10);
  PeerVerdict verdict;
  bool warned = false;
  // Checked after the last sleep too: an offer in the window's last moment
  // still counts.
  for (;;) {
    if (rendezvous.MembershipChanged()) {
      DJ_LOG_INFO(
          "rank {}'s failure follows a lost peer: re-forming without a "
          "restart",
          own.rank);
      verdict.kind = PeerVerdict::Kind::kPeerLost;
      return verdict;
    }
    if (std::optional<FailureReport> peer =
            OfferedRootCause(rendezvous, &warned)) {
      DJ_LOG_INFO(
          "rank {}'s failure follows rank {}'s on host {} ({}): deciding on "
          "that failure",
          own.rank, peer->rank, peer->host, peer->cause.exception.line);
      verdict.kind = PeerVerdict::Kind::kPeerFailed;
      verdict.peer_failure = *std::move(peer);
      return verdict;
    }
    const absl::Time now = absl::Now();
    if (now >= until) break;
    if (now >= next_note) {
      DJ_LOG_INFO(
          "still waiting for a lost peer or another node's failure ({} "
          "left)",
          absl::FormatDuration(absl::Trunc(until - now, absl::Seconds(1))));
      next_note = now + absl::Seconds(10);
    }
    if (!sleep(std::min(absl::Milliseconds(100), until - now))) {
      verdict.kind = PeerVerdict::Kind::kStopped;
      return verdict;
    }
  }
  DJ_LOG_INFO(
      "no peer was lost and no other node's worker failed within {}: the "
      "failure is this node's",
      absl::FormatDuration(window));
  verdict.collateral =
      Offered(rendezvous, OfferedFailureKind::kCommunication, &warned);
  if (verdict.collateral.has_value()) {
    DJ_LOG_INFO(
        "rank {} on host {} failed with a communication error too ({}): "
        "either failure seen again counts as the same root cause",
        verdict.collateral->rank, verdict.collateral->host,
        verdict.collateral->cause.exception.line);
  }
  return verdict;
}

std::string RootCauseRecord(const FailureReport& failure,
                            const std::optional<FailureReport>& collateral) {
  std::vector<std::string> signatures;
  if (!failure.signature.empty()) signatures.push_back(failure.signature);
  if (collateral.has_value() && !collateral->signature.empty()) {
    signatures.push_back(collateral->signature);
  }
  return absl::StrJoin(signatures, "\n");
}

const FailureReport* RepeatOf(absl::string_view previous,
                              const FailureReport& failure,
                              const std::optional<FailureReport>& collateral) {
  const std::vector<absl::string_view> seen =
      absl::StrSplit(previous, '\n', absl::SkipEmpty());
  auto repeats = [&seen](const FailureReport& f) {
    return !f.signature.empty() &&
           std::find(seen.begin(), seen.end(), f.signature) != seen.end();
  };
  if (repeats(failure)) return &failure;
  if (collateral.has_value() && repeats(*collateral)) return &*collateral;
  return nullptr;
}

}  // namespace distjob
