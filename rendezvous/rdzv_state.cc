#include "rendezvous/rdzv_state.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace distjob {

std::string RdzvState::Encode() const {
  std::string out = absl::StrCat("round ", round, "\nclosed ", closed ? 1 : 0,
                                 "\nrestarts ", restart_count, "\n");
  if (closed) {
    absl::StrAppend(&out, "closer ", closer, " ", size, " ", world_size, "\n");
    if (!leader.empty()) absl::StrAppend(&out, "leader ", leader, "\n");
  }
  if (prev_round >= 0) {
    absl::StrAppend(&out, "prev ", prev_round, " ", prev_closer, " ", prev_size,
                    "\n");
  }
  return out;
}

absl::StatusOr<RdzvState> RdzvState::Decode(const std::string& text) {
  RdzvState s;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    bool ok = false;
    if (f.size() == 2 && f[0] == "round") {
      ok = absl::SimpleAtoi(f[1], &s.round);
    } else if (f.size() == 2 && f[0] == "closed") {
      s.closed = f[1] == "1";
      ok = f[1] == "0" || f[1] == "1";
    } else if (f.size() == 2 && f[0] == "restarts") {
      ok = absl::SimpleAtoi(f[1], &s.restart_count);
    } else if (f.size() == 4 && f[0] == "closer") {
      s.closer = f[1];
      ok = !s.closer.empty() && absl::SimpleAtoi(f[2], &s.size) &&
           absl::SimpleAtoi(f[3], &s.world_size);
    } else if (f.size() == 2 && f[0] == "leader") {
      s.leader = f[1];
      ok = !s.leader.empty();
    } else if (f.size() == 4 && f[0] == "prev") {
      s.prev_closer = f[2];
      ok = absl::SimpleAtoi(f[1], &s.prev_round) && !s.prev_closer.empty() &&
           absl::SimpleAtoi(f[3], &s.prev_size) && s.prev_size >= 0;
    }
    if (!ok) {
      return absl::DataLossError(
          absl::StrCat("malformed rendezvous state line '", line, "'"));
    }
  }
  return s;
}

RdzvState NextRound(const RdzvState& current, int restart_count) {
  RdzvState next;
  next.round = current.round + 1;
  next.restart_count = std::max(current.restart_count, restart_count);
  next.prev_round = current.closed ? current.round : current.prev_round;
  next.prev_closer = current.closed ? current.closer : current.prev_closer;
  next.prev_size = current.closed ? current.size : current.prev_size;
  return next;
}

namespace {

// The optional fields of a record, " i=<index> k=<key>", each only if set.
std::string TopologyFields(const RdzvParticipant& p) {
  std::string out;
  if (!p.pod_index.empty()) absl::StrAppend(&out, " i=", p.pod_index);
  if (!p.order_key.empty()) absl::StrAppend(&out, " k=", p.order_key);
  return out;
}

bool ParseTopologyField(absl::string_view field, RdzvParticipant* p) {
  if (absl::ConsumePrefix(&field, "i=")) {
    p->pod_index = std::string(field);
    return IsPodIndex(p->pod_index);
  }
  if (absl::ConsumePrefix(&field, "k=")) {
    p->order_key = std::string(field);
    return !field.empty();
  }
  return false;
}

// "3" -> {3}, "1.0" -> {1, 0}; empty when `index` is no pod index.
std::vector<int64_t> IndexParts(const std::string& index) {
  std::vector<int64_t> parts;
  if (index.empty()) return parts;
  for (absl::string_view s : absl::StrSplit(index, '.')) {
    int64_t v = 0;
    if (s.empty() || s.size() > 12 ||
        !std::all_of(s.begin(), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        !absl::SimpleAtoi(s, &v)) {
      return {};
    }
    parts.push_back(v);
  }
  return parts;
}

}  // namespace

bool IsPodIndex(const std::string& index) { return !IndexParts(index).empty(); }

namespace {

std::string MemberLine(const RdzvParticipant& p) {
  return absl::StrCat(p.node, " ", p.nproc, " ", p.addr, TopologyFields(p),
                      "\n");
}

}  // namespace

std::string EncodeMembers(const std::vector<RdzvParticipant>& members) {
  std::string out;
  for (const auto& p : members) out += MemberLine(p);
  return out;
}

absl::StatusOr<std::vector<RdzvParticipant>> DecodeMembers(
    const std::string& text) {
  std::vector<RdzvParticipant> members;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    RdzvParticipant p;
    bool ok = f.size() >= 3 && f.size() <= 5 && !f[0].empty() &&
              absl::SimpleAtoi(f[1], &p.nproc);
    for (size_t i = 3; ok && i < f.size(); ++i) {
      ok = ParseTopologyField(f[i], &p);
    }
    if (!ok) {
      return absl::DataLossError(
          absl::StrCat("malformed rendezvous member line '", line, "'"));
    }
    p.node = f[0];
    p.addr = f[2];
    members.push_back(std::move(p));
  }
  return members;
}

std::vector<std::pair<int64_t, std::string>> EncodeMemberChunks(
    const std::vector<RdzvParticipant>& members, size_t max_bytes) {
  std::vector<std::pair<int64_t, std::string>> chunks;
  for (size_t i = 0; i < members.size(); ++i) {
    std::string line = MemberLine(members[i]);
    if (chunks.empty() ||
        chunks.back().second.size() + line.size() > max_bytes) {
      chunks.emplace_back(static_cast<int64_t>(i), std::string());
    }
    chunks.back().second += line;
  }
  return chunks;
}

absl::StatusOr<std::vector<RdzvParticipant>> AssembleMembers(
    std::vector<std::pair<int64_t, std::string>> chunks, int size) {
  // Followed from rank 0, each chunk found by where the one before ended:
  // a list written again with its boundaries moved (a close written during
  // the last call, then once more for a node that joined during it) leaves
  // chunks of the first write that no chain from rank 0 reaches.
  absl::flat_hash_map<int64_t, std::string*> by_first;
  for (auto& [first, text] : chunks) by_first[first] = &text;
  std::vector<RdzvParticipant> members;
  members.reserve(std::max(size, 0));
  while (static_cast<int64_t>(members.size()) < size) {
    const int64_t first = static_cast<int64_t>(members.size());
    auto it = by_first.find(first);
    if (it == by_first.end()) {
      return absl::DataLossError(
          absl::StrCat("rendezvous member list: ", first, " of ", size,
                       " members found, and no chunk starts at rank ", first));
    }
    auto part = DecodeMembers(*it->second);
    if (!part.ok()) return part.status();
    if (part->empty()) {
      return absl::DataLossError(absl::StrCat(
          "rendezvous member list: the chunk at rank ", first, " is empty"));
    }
    for (auto& p : *part) members.push_back(std::move(p));
  }
  members.resize(size);
  return members;
}

void AssignRanks(const std::string& host,
                 const std::vector<std::string>& previous,
                 std::vector<RdzvParticipant>* members) {
  // One lookup per member: thousands of nodes would make a scan of
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
      members->begin(), members->end(),
      [&](const auto& a, const auto& b) { return order(a) < order(b); });
  const bool topology =
      std::any_of(members->begin(), members->end(), [](const auto& p) {
        return !p.pod_index.empty() || !p.order_key.empty();
      });
  if (!topology) return;
  // Topology-aware schedulers (Kueue TAS) place pods assuming ranks follow
  // the pod index; parsed once per member, not per comparison.
  absl::flat_hash_map<std::string, std::vector<int64_t>> index;
  for (const RdzvParticipant& p : *members) {
    index.emplace(p.node, IndexParts(p.pod_index));
  }
  std::stable_sort(members->begin(), members->end(),
                   [&](const auto& a, const auto& b) {
                     const auto& ia = index[a.node];
                     const auto& ib = index[b.node];
                     if (ia.empty() || ib.empty()) {
                       return !ia.empty() && ib.empty();
                     }
                     return ia < ib;
                   });
  // A key's group sits where its first member in that order sits.
  absl::flat_hash_map<std::string, size_t> group;
  for (const RdzvParticipant& p : *members) {
    group.emplace(p.order_key, group.size());
  }
  std::stable_sort(members->begin(), members->end(),
                   [&](const auto& a, const auto& b) {
                     return group[a.order_key] < group[b.order_key];
                   });
}

std::string EncodeRank(const RankRecord& r) {
  return absl::StrCat(r.group_rank, " ", r.base_rank, " ", r.next);
}

absl::StatusOr<RankRecord> DecodeRank(const std::string& text) {
  std::vector<std::string> f = absl::StrSplit(text, absl::MaxSplits(' ', 2));
  RankRecord r;
  if (f.size() != 3 || !absl::SimpleAtoi(f[0], &r.group_rank) ||
      !absl::SimpleAtoi(f[1], &r.base_rank) || f[2].empty()) {
    return absl::DataLossError(
        absl::StrCat("malformed rendezvous rank record '", text, "'"));
  }
  r.next = f[2];
  return r;
}

std::vector<std::pair<std::string, RankRecord>> RankRecords(
    const std::vector<RdzvParticipant>& members) {
  std::vector<std::pair<std::string, RankRecord>> out;
  out.reserve(members.size());
  int base = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    RankRecord r;
    r.group_rank = static_cast<int>(i);
    r.base_rank = base;
    r.next = members[(i + 1) % members.size()].node;
    base += members[i].nproc;
    out.emplace_back(members[i].node, std::move(r));
  }
  return out;
}

std::string EncodeJoin(const RdzvParticipant& p) {
  // The node name stays last (the rest of the record); the optional fields
  // go before it.
  std::string fields = TopologyFields(p);
  return absl::StrCat(p.nproc, " ", p.addr, fields, " ", p.node);
}

absl::StatusOr<RdzvParticipant> DecodeJoin(const std::string& text) {
  std::vector<std::string> f = absl::StrSplit(text, absl::MaxSplits(' ', 2));
  RdzvParticipant p;
  bool ok = f.size() == 3 && absl::SimpleAtoi(f[0], &p.nproc);
  std::string rest = f.size() == 3 ? f[2] : "";
  while (ok && (absl::StartsWith(rest, "i=") || absl::StartsWith(rest, "k="))) {
    const size_t space = rest.find(' ');
    ok = space != std::string::npos &&
         ParseTopologyField(absl::string_view(rest).substr(0, space), &p);
    rest = ok ? rest.substr(space + 1) : "";
  }
  if (!ok || rest.empty()) {
    return absl::DataLossError(
        absl::StrCat("malformed rendezvous join record '", text, "'"));
  }
  p.addr = f[1];
  p.node = rest;
  return p;
}

}  // namespace distjob
