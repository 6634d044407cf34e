#include "rendezvous/rdzv_state.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace distjob {

int RdzvState::Find(const std::string& node) const {
  for (size_t i = 0; i < participants.size(); ++i) {
    if (participants[i].node == node) return static_cast<int>(i);
  }
  return -1;
}

std::string RdzvState::Encode() const {
  std::string out = absl::StrCat("round ", round, "\nclosed ", closed ? 1 : 0,
                                 "\nrestarts ", restart_count, "\nprev ",
                                 absl::StrJoin(previous, ","), "\n");
  for (const auto& p : participants) {
    absl::StrAppend(&out, "p ", p.node, " ", p.nproc, " ", p.addr, "\n");
  }
  return out;
}

absl::StatusOr<RdzvState> RdzvState::Decode(const std::string& text) {
  RdzvState s;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    bool ok = f.size() >= 2;
    if (ok && f[0] == "round") {
      ok = absl::SimpleAtoi(f[1], &s.round);
    } else if (ok && f[0] == "closed") {
      s.closed = f[1] == "1";
    } else if (ok && f[0] == "restarts") {
      ok = absl::SimpleAtoi(f[1], &s.restart_count);
    } else if (ok && f[0] == "prev") {
      s.previous = absl::StrSplit(f[1], ',', absl::SkipEmpty());
    } else if (f.size() == 4 && f[0] == "p") {
      RdzvParticipant p{f[1], 0, f[3]};
      ok = absl::SimpleAtoi(f[2], &p.nproc);
      s.participants.push_back(std::move(p));
    } else if (f.size() == 1 && f[0] == "prev") {
      ok = true;
    } else {
      ok = false;
    }
    if (!ok) {
      return absl::DataLossError(
          absl::StrCat("malformed rendezvous state line '", line, "'"));
    }
  }
  return s;
}

void RdzvState::AssignRanks(const std::string& host) {
  // One lookup per participant: thousands of nodes would make a scan of
  // `previous` per comparison quadratic.
  absl::flat_hash_map<std::string, size_t> old_rank;
  for (size_t i = 0; i < previous.size(); ++i) {
    old_rank.emplace(previous[i], i + 1);
  }
  auto order = [&](const RdzvParticipant& p) -> size_t {
    if (p.node == host) return 0;
    auto it = old_rank.find(p.node);
    return it == old_rank.end() ? previous.size() + 1 : it->second;
  };
  std::stable_sort(
      participants.begin(), participants.end(),
      [&](const auto& a, const auto& b) { return order(a) < order(b); });
}

std::string EncodeJoin(const RdzvParticipant& p) {
  return absl::StrCat(p.nproc, " ", p.addr, " ", p.node);
}

absl::StatusOr<RdzvParticipant> DecodeJoin(const std::string& text) {
  std::vector<std::string> f = absl::StrSplit(text, absl::MaxSplits(' ', 2));
  RdzvParticipant p;
  if (f.size() != 3 || !absl::SimpleAtoi(f[0], &p.nproc) || f[2].empty()) {
    return absl::DataLossError(
        absl::StrCat("malformed rendezvous join record '", text, "'"));
  }
  p.addr = f[1];
  p.node = f[2];
  return p;
}

}  // namespace distjob
