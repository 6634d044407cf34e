#include "rendezvous/rdzv_status.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/round_info.h"
#include "rendezvous/worker_store_record.h"

namespace distjob {
namespace {

// Seconds to the millisecond, as the table shows them to the tenth.
double AgeSeconds(absl::Duration age) {
  return std::round(absl::ToDoubleSeconds(age) * 1000) / 1000;
}

// What another pod wrote, fit for the operator's terminal: any byte that
// is not printable ASCII (escape sequences, C1 controls in UTF-8) as \xNN.
std::string Shown(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '\\') {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out;
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

// One listing of the store, by key.
struct Listed {
  std::map<std::string, std::string> values;
  std::map<std::string, absl::Duration> ages;

  const std::string* Find(const std::string& key) const {
    auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  }
  std::string Age(const std::string& key) const {
    auto it = ages.find(key);
    if (it == ages.end()) return "-";
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(it->second));
  }
  Json AgeJson(const std::string& key) const {
    auto it = ages.find(key);
    return it == ages.end() ? Json() : Json(AgeSeconds(it->second));
  }
};

// A closed round's members, from its chunks.
absl::StatusOr<std::vector<RdzvParticipant>> ClosedMembers(
    const RdzvKeys& keys, const Listed& l, int64_t round,
    const std::string& closer, int size) {
  std::vector<std::pair<int64_t, std::string>> chunks;
  const std::string prefix = keys.MembersPrefix(round, closer);
  for (auto it = l.values.lower_bound(prefix);
       it != l.values.end() && absl::StartsWith(it->first, prefix); ++it) {
    auto first = keys.ParseMembers(it->first, round, closer);
    if (first.has_value()) chunks.emplace_back(*first, it->second);
  }
  return AssembleMembers(std::move(chunks), size);
}

// An open round's members: their join records, in join order.
absl::StatusOr<std::vector<RdzvParticipant>> JoinedMembers(const RdzvKeys& keys,
                                                           const Listed& l,
                                                           int64_t round) {
  std::map<int64_t, std::string> records;
  const std::string prefix = keys.JoinPrefix(round);
  for (auto it = l.values.lower_bound(prefix);
       it != l.values.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (auto i = keys.ParseJoin(it->first, round); i.has_value()) {
      records[*i] = it->second;
    }
  }
  std::vector<RdzvParticipant> members;
  for (const auto& [i, v] : records) {
    auto p = DecodeJoin(v);
    if (!p.ok()) return p.status();
    members.push_back(*std::move(p));
  }
  return members;
}

// What an open round waits for: how many joined of how many, until when,
// and which members of the last round have not joined again.
void DescribeOpenRound(const RdzvKeys& keys, const Listed& l,
                       const RdzvState& st,
                       const std::vector<RdzvParticipant>& joined,
                       std::string* text, Json* job) {
  std::optional<RoundInfo> info;
  if (const std::string* v = l.Find(keys.RoundInfo(st.round))) {
    if (auto decoded = DecodeRoundInfo(*v); decoded.ok()) info = *decoded;
  }
  std::set<std::string> names;
  for (const auto& p : joined) names.insert(p.node);
  std::vector<std::string> missing;
  if (st.prev_round >= 0) {
    auto last =
        ClosedMembers(keys, l, st.prev_round, st.prev_closer, st.prev_size);
    if (last.ok()) {
      for (const auto& p : *last) {
        if (!names.count(p.node)) missing.push_back(p.node);
      }
    }
  }
  const int n = static_cast<int>(joined.size());
  Json& open = (*job)["open_round"];
  open["joined"] = n;
  open["min_nodes"] = info ? Json(info->min_nodes) : Json();
  open["max_nodes"] = info ? Json(info->max_nodes) : Json();
  open["nodes_needed"] = info ? Json(std::max(0, info->min_nodes - n)) : Json();
  open["last_call_ends"] = info && info->last_call_ends
                               ? Json(Rfc3339(*info->last_call_ends))
                               : Json();
  open["missing_from_last_round"] = Json::array();
  for (const auto& m : missing) open["missing_from_last_round"].push_back(m);
  std::string line = absl::StrCat("  joined ", n, " node(s)");
  if (info.has_value()) {
    absl::StrAppend(&line, " of ", info->min_nodes, "..", info->max_nodes);
    if (n < info->min_nodes) {
      absl::StrAppend(&line, "; waiting for ", info->min_nodes - n,
                      " more to reach min_nodes");
    } else if (info->last_call_ends.has_value()) {
      absl::StrAppend(&line, "; last call ends ",
                      absl::FormatTime("%H:%M:%S UTC", *info->last_call_ends,
                                       absl::UTCTimeZone()),
                      " (on the clock of the node that began it)");
    }
  }
  absl::StrAppend(text, line, "\n");
  if (!missing.empty()) {
    std::vector<std::string> shown;
    for (const auto& m : missing) shown.push_back(Shown(m));
    absl::StrAppend(text, "  not joined again from round ", st.prev_round, ": ",
                    absl::StrJoin(shown, ", "), "\n");
  }
}

void DescribeMembers(const RdzvKeys& keys, const Listed& l, const RdzvState& st,
                     const std::vector<RdzvParticipant>& members,
                     std::string* text, Json* job) {
  absl::StrAppend(
      text, absl::StrFormat("  %-5s %-28s %-6s %-18s %s\n", "RANK", "NODE",
                            "NPROC", "ADDR", "HEARTBEAT_AGE"));
  (*job)["participants"] = Json::array();
  for (size_t i = 0; i < members.size(); ++i) {
    const auto& p = members[i];
    const std::string alive = keys.Alive(p.node);
    absl::StrAppend(
        text, absl::StrFormat("  %-5s %-28s %-6d %-18s %s\n",
                              st.closed ? absl::StrCat(i) : "-", Shown(p.node),
                              p.nproc, Shown(p.addr), l.Age(alive)));
    Json& participant = (*job)["participants"].emplace_back();
    participant["rank"] = st.closed ? Json(i) : Json();
    participant["node"] = p.node;
    participant["nproc"] = p.nproc;
    participant["addr"] = p.addr;
    participant["heartbeat_age_s"] = l.AgeJson(alive);
    // The rank order's inputs (rdzv_state.h), null when the node has none.
    participant["pod_index"] = p.pod_index.empty() ? Json() : Json(p.pod_index);
    participant["order_key"] = p.order_key.empty() ? Json() : Json(p.order_key);
  }
}

void DescribeWaiting(const RdzvKeys& keys, const Listed& l, std::string* text,
                     Json* job) {
  (*job)["waiting"] = Json::array();
  const std::string prefix = keys.WaitingPrefix();
  for (auto it = l.values.lower_bound(prefix);
       it != l.values.end() && absl::StartsWith(it->first, prefix); ++it) {
    auto node = keys.ParseWaiting(it->first);
    if (!node.has_value()) continue;
    absl::StrAppend(text, "  waiting: ", Shown(*node), " (heartbeat ",
                    l.Age(it->first), " ago)\n");
    (*job)["waiting"].push_back(
        {{"node", *node}, {"heartbeat_age_s", l.AgeJson(it->first)}});
  }
}

absl::Status DescribeJob(const std::string& id, const Listed& l,
                         std::string* text, Json* job) {
  const RdzvKeys keys(id);
  // Round 0 has no state until it closes: its joins are all there is.
  RdzvState st;
  if (const std::string* raw = l.Find(keys.State())) {
    auto decoded = RdzvState::Decode(*raw);
    if (!decoded.ok()) return decoded.status();
    st = *std::move(decoded);
  }
  auto members = st.closed
                     ? ClosedMembers(keys, l, st.round, st.closer, st.size)
                     : JoinedMembers(keys, l, st.round);
  if (!members.ok()) return members.status();
  const std::string* host = l.Find(keys.Host());
  absl::StrAppend(text, "rendezvous ", Shown(id), ": round ", st.round, " ",
                  st.closed ? "closed" : "open", ", restarts ",
                  st.restart_count, ", store host ",
                  host == nullptr || host->empty() ? "-" : Shown(*host), "\n");
  (*job)["run_id"] = id;
  (*job)["round"] = st.round;
  (*job)["closed"] = st.closed;
  (*job)["restart_count"] = st.restart_count;
  (*job)["store_host"] = host == nullptr ? "" : *host;
  // Who serves the workers' TCPStore: null until group rank 0 of a closed
  // round wrote it (or when what is there is not such a record: an agent
  // that predates the JSON record wrote a line of text).
  std::optional<WorkerStoreRecord> record;
  if (const std::string* v = l.Find(keys.WorkerStore())) {
    if (auto decoded = DecodeWorkerStoreRecord(*v); decoded.ok()) {
      record = *std::move(decoded);
    }
  }
  (*job)["worker_store"] =
      record.has_value() ? WorkerStoreJson(*record) : Json(nullptr);
  absl::StrAppend(text, "  workers' store: ",
                  record.has_value() ? Shown(WorkerStoreLine(*record)) : "-",
                  "\n");
  if (!st.closed) DescribeOpenRound(keys, l, st, *members, text, job);
  DescribeMembers(keys, l, st, *members, text, job);
  DescribeWaiting(keys, l, text, job);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RenderRendezvousStatus(StoreInterface* store,
                                                   const std::string& run_id,
                                                   bool json) {
  auto listing = store->List(run_id.empty() ? std::string(kRdzvRoot)
                                            : RdzvKeys::Prefix(run_id));
  if (!listing.ok()) return listing.status();
  std::set<std::string> ids;
  Listed l;
  for (const auto& e : listing->entries) {
    l.values[e.key] = e.value;
    l.ages[e.key] = e.age;
    if (auto id = ParseRdzvRunId(e.key); id.has_value()) {
      // Without an id, every job; with one, only it (a job whose id
      // extends this one's, "a/b" for "a", lists under its prefix too).
      if (run_id.empty() || *id == run_id) ids.insert(*id);
    }
  }
  if (ids.empty()) {
    return absl::NotFoundError(
        run_id.empty() ? "no rendezvous in the store"
                       : absl::StrCat("no rendezvous '", Shown(run_id), "'"));
  }
  std::string text;
  Json js = Json::array();
  for (const std::string& id : ids) {
    if (absl::Status s = DescribeJob(id, l, &text, &js.emplace_back());
        !s.ok()) {
      return s;
    }
  }
  return json ? DumpJson(js, -1, /*ascii=*/true) + "\n" : text;
}

}  // namespace distjob
