#include "rendezvous/rdzv_keys.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace distjob {
namespace {

constexpr absl::string_view kStateSuffix = "/ctl/state";

// The rest of `key` after `prefix` if it is one path segment (non-empty,
// no '/').
std::optional<std::string> Segment(absl::string_view key,
                                   absl::string_view prefix) {
  if (!absl::ConsumePrefix(&key, prefix)) return std::nullopt;
  if (key.empty() || absl::StrContains(key, '/')) return std::nullopt;
  return std::string(key);
}

// A non-negative index as the writers print it, in decimal digits only.
std::optional<int64_t> Index(const std::optional<std::string>& text) {
  if (!text.has_value()) return std::nullopt;
  for (char c : *text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  int64_t i = 0;
  if (!absl::SimpleAtoi(*text, &i)) return std::nullopt;
  return i;
}

}  // namespace

std::optional<std::string> ParseRdzvStateKey(absl::string_view key) {
  if (!absl::ConsumePrefix(&key, kRdzvRoot) ||
      !absl::ConsumeSuffix(&key, kStateSuffix) || key.empty()) {
    return std::nullopt;
  }
  return std::string(key);
}

std::optional<std::string> ParseRdzvRunId(absl::string_view key) {
  if (auto id = ParseRdzvStateKey(key); id.has_value()) return id;
  if (!absl::ConsumePrefix(&key, kRdzvRoot)) return std::nullopt;
  const size_t at = key.rfind("/joined/");
  if (at == absl::string_view::npos || at == 0) return std::nullopt;
  const absl::string_view round = key.substr(at + sizeof("/joined/") - 1);
  if (!Index(std::string(round)).has_value()) return std::nullopt;
  return std::string(key.substr(0, at));
}

RdzvKeys::RdzvKeys(const std::string& run_id) : prefix_(Prefix(run_id)) {}

std::string RdzvKeys::Prefix(const std::string& run_id) {
  return absl::StrCat(kRdzvRoot, run_id, "/");
}

std::string RdzvKeys::Alive(absl::string_view node) const {
  return absl::StrCat(AlivePrefix(), node);
}

std::string RdzvKeys::Waiting(absl::string_view node) const {
  return absl::StrCat(WaitingPrefix(), node);
}

std::string RdzvKeys::Joined(int64_t round) const {
  return absl::StrCat(prefix_, "joined/", round);
}

std::string RdzvKeys::RoundInfo(int64_t round) const {
  return absl::StrCat(prefix_, "round-info/", round);
}

std::string RdzvKeys::JoinPrefix(int64_t round) const {
  return absl::StrCat(prefix_, "join/", round, "/");
}

std::string RdzvKeys::Join(int64_t round, int64_t index) const {
  return absl::StrCat(JoinPrefix(round), index);
}

std::string RdzvKeys::MembersPrefix(int64_t round,
                                    absl::string_view closer) const {
  return absl::StrCat(prefix_, "members/", round, "/", closer, "/");
}

std::string RdzvKeys::Members(int64_t round, absl::string_view closer,
                              int64_t first) const {
  return absl::StrCat(MembersPrefix(round, closer), first);
}

std::string RdzvKeys::Rank(int64_t round, absl::string_view closer,
                           absl::string_view node) const {
  return absl::StrCat(prefix_, "rank/", round, "/", closer, "/", node);
}

std::string RdzvKeys::Master(int64_t round) const {
  return absl::StrCat(prefix_, "master/", round);
}

std::string RdzvKeys::Failed(int64_t round) const {
  return absl::StrCat(prefix_, "failed/", round);
}

std::string RdzvKeys::OfferedFailure(int64_t round) const {
  return absl::StrCat(prefix_, "offered-failure/", round);
}

std::string RdzvKeys::OfferedCommunicationError(int64_t round) const {
  return absl::StrCat(prefix_, "offered-communication-error/", round);
}

std::string RdzvKeys::DonePrefix(int64_t round) const {
  return absl::StrCat(prefix_, "done/", round, "/");
}

std::string RdzvKeys::Done(int64_t round, absl::string_view node) const {
  return absl::StrCat(DonePrefix(round), node);
}

std::string RdzvKeys::DoneCount(int64_t round) const {
  return absl::StrCat(prefix_, "done-count/", round);
}

std::string RdzvKeys::DoneAll(int64_t round) const {
  return absl::StrCat(prefix_, "done-all/", round);
}

std::string RdzvKeys::Left(int64_t round) const {
  return absl::StrCat(prefix_, "left/", round);
}

std::string RdzvKeys::SeenEnd(absl::string_view node) const {
  return absl::StrCat(SeenEndPrefix(), node);
}

std::optional<std::string> RdzvKeys::ParseAlive(absl::string_view key) const {
  return Segment(key, AlivePrefix());
}

std::optional<std::string> RdzvKeys::ParseWaiting(absl::string_view key) const {
  return Segment(key, WaitingPrefix());
}

std::optional<std::string> RdzvKeys::ParseDone(absl::string_view key,
                                               int64_t round) const {
  return Segment(key, DonePrefix(round));
}

std::optional<std::string> RdzvKeys::ParseSeenEnd(absl::string_view key) const {
  return Segment(key, SeenEndPrefix());
}

std::optional<int64_t> RdzvKeys::ParseJoin(absl::string_view key,
                                           int64_t round) const {
  auto i = Index(Segment(key, JoinPrefix(round)));
  if (!i.has_value() || *i < 1) return std::nullopt;
  return i;
}

std::optional<int64_t> RdzvKeys::ParseMembers(absl::string_view key,
                                              int64_t round,
                                              absl::string_view closer) const {
  return Index(Segment(key, MembersPrefix(round, closer)));
}

}  // namespace distjob
