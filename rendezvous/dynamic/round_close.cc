#include "rendezvous/dynamic/round_close.h"

#include <algorithm>
#include <set>
#include <utility>

#include "rendezvous/dynamic/round_members.h"

namespace distjob {
namespace {

// Keeps the first record of each node; whether any was dropped.
bool DropRepeatedNodes(std::vector<RdzvParticipant>* members) {
  std::set<std::string> seen;
  const size_t before = members->size();
  members->erase(std::remove_if(members->begin(), members->end(),
                                [&seen](const RdzvParticipant& p) {
                                  return !seen.insert(p.node).second;
                                }),
                 members->end());
  return members->size() != before;
}

}  // namespace

RoundClose::RoundClose(Deps deps) : d_(std::move(deps)) {}

RdzvState RoundClose::State(const RdzvState& open) const {
  RdzvState next = open;
  next.closed = true;
  next.closer = d_.node;
  next.size = size_;
  next.world_size = world_;
  next.leader = leader_;
  return next;
}

bool RoundClose::StillWritten(const RdzvState& st) {
  if (round_ != st.round || !by_index_) return false;
  auto joined = d_.store->Add(d_.keys->Joined(st.round), 0);
  return joined.ok() && std::min<int64_t>(*joined, d_.max_nodes) == joined_;
}

absl::Status RoundClose::Write(const RdzvState& st, bool ahead) {
  bool by_index = false;
  int64_t counted = 0;
  round_ = -1;
  auto members = Joined(st.round, &by_index, &counted, !ahead);
  if (!members.ok()) return members.status();
  // Written by the store's host before it serves anyone.
  std::string host;
  if (auto h = d_.store->Get(d_.keys->Host(), absl::ZeroDuration()); h.ok()) {
    host = *h;
  }
  std::vector<std::string> previous;
  if (st.prev_round >= 0) {
    // Read once, by the one or two nodes that close a round.
    auto prev = ReadRoundMembers(d_.store, *d_.keys, st.prev_round,
                                 st.prev_closer, st.prev_size);
    if (prev.ok()) {
      for (const auto& p : *prev) previous.push_back(p.node);
    }
  }
  AssignRanks(host, previous, &*members);
  // The records go in before the compare-set that closes the round: a
  // node that sees it closed finds its own.
  world_ = 0;
  for (const auto& p : *members) world_ += p.nproc;
  size_ = static_cast<int>(members->size());
  leader_ = by_index && !members->empty() ? (*members)[0].node : "";
  // Under the store's keys and bytes per request: a chunk of the member
  // list is at most kMemberChunkBytes, a rank record a few dozen bytes.
  constexpr size_t kKeysPerRequest = 1024;
  constexpr size_t kBytesPerRequest = size_t{1} << 20;
  std::vector<std::pair<std::string, std::string>> kvs;
  size_t bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (kvs.empty()) return absl::OkStatus();
    auto s = d_.store->MultiSet(kvs, absl::ZeroDuration());
    kvs.clear();
    bytes = 0;
    return s.status();
  };
  auto put = [&](std::string key, std::string value) -> absl::Status {
    if (kvs.size() == kKeysPerRequest ||
        bytes + key.size() + value.size() > kBytesPerRequest) {
      if (auto s = flush(); !s.ok()) return s;
    }
    bytes += key.size() + value.size();
    kvs.emplace_back(std::move(key), std::move(value));
    return absl::OkStatus();
  };
  for (auto& [first, text] : EncodeMemberChunks(*members)) {
    if (auto s =
            put(d_.keys->Members(st.round, d_.node, first), std::move(text));
        !s.ok()) {
      return s;
    }
  }
  for (auto& [node, rec] : RankRecords(*members)) {
    if (auto s = put(d_.keys->Rank(st.round, d_.node, node), EncodeRank(rec));
        !s.ok()) {
      return s;
    }
  }
  if (auto s = flush(); !s.ok()) return s;
  round_ = st.round;
  joined_ = counted;
  by_index_ = by_index;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RdzvParticipant>> RoundClose::Joined(
    int64_t round, bool* by_index, int64_t* counted, bool wait_for_records) {
  *by_index = false;
  auto joined = d_.store->Add(d_.keys->Joined(round), 0);
  if (!joined.ok()) return joined.status();
  const int64_t n = std::min<int64_t>(*joined, d_.max_nodes);
  if (counted != nullptr) *counted = n;
  std::vector<RdzvParticipant> members;
  // A node counted but not yet written is on its way: the blocking read
  // waits for it, at most one lease (it may have died in between).
  constexpr int64_t kChunk = 1024;  // under the store's keys per request
  bool complete = true;
  for (int64_t first = 1; complete && first <= n; first += kChunk) {
    std::vector<std::string> keys;
    for (int64_t i = first; i < first + kChunk && i <= n; ++i) {
      keys.push_back(d_.keys->Join(round, i));
    }
    auto values = d_.store->MultiGet(
        keys, wait_for_records ? d_.lease : absl::ZeroDuration());
    complete = values.ok();
    for (size_t i = 0; complete && i < values->size(); ++i) {
      auto p = DecodeJoin((*values)[i]);
      if (!p.ok()) return p.status();
      members.push_back(*std::move(p));
    }
  }
  if (complete) {
    // A join whose answer was lost and that was made again left the node
    // at two places: it counts once, at the first, and the places no
    // longer name the members.
    *by_index = !DropRepeatedNodes(&members);
    return members;
  }
  // Someone never wrote its record: the round closes with those who did.
  auto listing = d_.store->List(d_.keys->JoinPrefix(round));
  if (!listing.ok()) return listing.status();
  std::vector<std::pair<int64_t, RdzvParticipant>> indexed;
  for (const auto& e : listing->entries) {
    const std::optional<int64_t> i = d_.keys->ParseJoin(e.key, round);
    if (!i.has_value() || *i > n) continue;
    auto p = DecodeJoin(e.value);
    if (!p.ok()) return p.status();
    indexed.emplace_back(*i, *std::move(p));
  }
  std::sort(indexed.begin(), indexed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  members.clear();
  for (auto& [i, p] : indexed) members.push_back(std::move(p));
  DropRepeatedNodes(&members);
  return members;
}

}  // namespace distjob
