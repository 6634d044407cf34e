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
#include "rendezvous/worker_store_record.h"

namespace distjob {
namespace {

// Seconds to the millisecond, as the table shows them to the tenth.
double AgeSeconds(absl::Duration age) {
  return std::round(absl::ToDoubleSeconds(age) * 1000) / 1000;
}

std::string Age(const std::map<std::string, absl::Duration>& ages,
                const std::string& key) {
  auto it = ages.find(key);
  if (it == ages.end()) return "-";
  return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(it->second));
}

}  // namespace

absl::StatusOr<std::string> RenderRendezvousStatus(StoreInterface* store,
                                                   const std::string& run_id,
                                                   bool json) {
  auto listing = store->List(run_id.empty() ? std::string(kRdzvRoot)
                                            : RdzvKeys::Prefix(run_id));
  if (!listing.ok()) return listing.status();
  std::set<std::string> ids;
  std::map<std::string, std::string> values;
  std::map<std::string, absl::Duration> ages;
  for (const auto& e : listing->entries) {
    values[e.key] = e.value;
    ages[e.key] = e.age;
    if (auto id = ParseRdzvStateKey(e.key); id.has_value()) ids.insert(*id);
  }
  if (ids.empty()) {
    return absl::NotFoundError(
        run_id.empty() ? "no rendezvous in the store"
                       : absl::StrCat("no rendezvous '", run_id, "'"));
  }
  std::string text;
  Json js = Json::array();
  for (const std::string& id : ids) {
    const RdzvKeys keys(id);
    auto st = RdzvState::Decode(values[keys.State()]);
    if (!st.ok()) return st.status();
    std::vector<RdzvParticipant> members;
    if (st->closed) {
      // Its chunks, from the same paged listing as the rest.
      std::vector<std::pair<int64_t, std::string>> chunks;
      const std::string prefix = keys.MembersPrefix(st->round, st->closer);
      for (auto it = values.lower_bound(prefix);
           it != values.end() && absl::StartsWith(it->first, prefix); ++it) {
        auto first = keys.ParseMembers(it->first, st->round, st->closer);
        if (first.has_value()) chunks.emplace_back(*first, it->second);
      }
      auto m = AssembleMembers(std::move(chunks), st->size);
      if (!m.ok()) return m.status();
      members = *std::move(m);
    } else {
      // An open round's members are their join records, in join order.
      std::map<int64_t, std::string> records;
      for (const auto& [k, v] : values) {
        if (auto i = keys.ParseJoin(k, st->round); i.has_value()) {
          records[*i] = v;
        }
      }
      for (const auto& [i, v] : records) {
        auto p = DecodeJoin(v);
        if (!p.ok()) return p.status();
        members.push_back(*std::move(p));
      }
    }
    std::vector<std::string> waiting;
    for (const auto& [k, v] : values) {
      if (auto node = keys.ParseWaiting(k); node.has_value()) {
        waiting.push_back(*node);
      }
    }
    const std::string host = values[keys.Host()];
    absl::StrAppend(&text, "rendezvous ", id, ": round ", st->round, " ",
                    st->closed ? "closed" : "open", ", restarts ",
                    st->restart_count, ", store host ",
                    host.empty() ? "-" : host, "\n");
    // Who serves the workers' TCPStore: null until group rank 0 of a closed
    // round wrote it (or when what is there is not such a record: an agent
    // that predates the JSON record wrote a line of text).
    std::optional<WorkerStoreRecord> record;
    if (auto it = values.find(keys.WorkerStore()); it != values.end()) {
      if (auto decoded = DecodeWorkerStoreRecord(it->second); decoded.ok()) {
        record = *std::move(decoded);
      }
    }
    Json worker_store =
        record.has_value() ? WorkerStoreJson(*record) : Json(nullptr);
    absl::StrAppend(&text, "  workers' store: ",
                    record.has_value() ? WorkerStoreLine(*record) : "-", "\n");
    absl::StrAppend(
        &text, absl::StrFormat("  %-5s %-28s %-6s %-18s %s\n", "RANK", "NODE",
                               "NPROC", "ADDR", "HEARTBEAT_AGE"));
    Json& job = js.emplace_back();
    job["run_id"] = id;
    job["round"] = st->round;
    job["closed"] = st->closed;
    job["restart_count"] = st->restart_count;
    job["store_host"] = host;
    job["worker_store"] = std::move(worker_store);
    job["participants"] = Json::array();
    for (size_t i = 0; i < members.size(); ++i) {
      const auto& p = members[i];
      const std::string alive = keys.Alive(p.node);
      absl::StrAppend(
          &text, absl::StrFormat("  %-5s %-28s %-6d %-18s %s\n",
                                 st->closed ? absl::StrCat(i) : "-", p.node,
                                 p.nproc, p.addr, Age(ages, alive)));
      auto age = ages.find(alive);
      Json& participant = job["participants"].emplace_back();
      participant["rank"] = st->closed ? Json(i) : Json();
      participant["node"] = p.node;
      participant["nproc"] = p.nproc;
      participant["addr"] = p.addr;
      participant["heartbeat_age_s"] =
          age == ages.end() ? Json() : Json(AgeSeconds(age->second));
      // The rank order's inputs (rdzv_state.h), null when the node has none.
      participant["pod_index"] =
          p.pod_index.empty() ? Json() : Json(p.pod_index);
      participant["order_key"] =
          p.order_key.empty() ? Json() : Json(p.order_key);
    }
    job["waiting"] = Json::array();
    for (size_t i = 0; i < waiting.size(); ++i) {
      const std::string key = keys.Waiting(waiting[i]);
      absl::StrAppend(&text, "  waiting: ", waiting[i], " (heartbeat ",
                      Age(ages, key), " ago)\n");
      job["waiting"].push_back(
          {{"node", waiting[i]}, {"heartbeat_age_s", AgeSeconds(ages[key])}});
    }
  }
  return json ? DumpJson(js) + "\n" : text;
}

}  // namespace distjob
