#include "rendezvous/rdzv_status.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"

namespace distjob {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
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
  std::string text, js = "[";
  for (const std::string& id : ids) {
    const RdzvKeys keys(id);
    auto st = RdzvState::Decode(values[keys.State()]);
    if (!st.ok()) return st.status();
    std::vector<RdzvParticipant> members;
    if (st->closed) {
      auto m = DecodeMembers(values[keys.Members(st->round, st->closer)]);
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
    absl::StrAppend(
        &text, absl::StrFormat("  %-5s %-28s %-6s %-18s %s\n", "RANK", "NODE",
                               "NPROC", "ADDR", "HEARTBEAT_AGE"));
    if (js.size() > 1) js += ",";
    absl::StrAppend(&js, "{\"run_id\":", Quote(id), ",\"round\":", st->round,
                    ",\"closed\":", st->closed ? "true" : "false",
                    ",\"restart_count\":", st->restart_count,
                    ",\"store_host\":", Quote(host), ",\"participants\":[");
    for (size_t i = 0; i < members.size(); ++i) {
      const auto& p = members[i];
      const std::string alive = keys.Alive(p.node);
      absl::StrAppend(
          &text, absl::StrFormat("  %-5s %-28s %-6d %-18s %s\n",
                                 st->closed ? absl::StrCat(i) : "-", p.node,
                                 p.nproc, p.addr, Age(ages, alive)));
      auto age = ages.find(alive);
      absl::StrAppend(
          &js, i ? "," : "",
          "{\"rank\":", st->closed ? absl::StrCat(i) : "null",
          ",\"node\":", Quote(p.node), ",\"nproc\":", p.nproc,
          ",\"addr\":", Quote(p.addr), ",\"heartbeat_age_s\":",
          age == ages.end()
              ? "null"
              : absl::StrFormat("%.3f", absl::ToDoubleSeconds(age->second)),
          "}");
    }
    js += "],\"waiting\":[";
    for (size_t i = 0; i < waiting.size(); ++i) {
      const std::string key = keys.Waiting(waiting[i]);
      absl::StrAppend(&text, "  waiting: ", waiting[i], " (heartbeat ",
                      Age(ages, key), " ago)\n");
      absl::StrAppend(&js, i ? "," : "", "{\"node\":", Quote(waiting[i]),
                      ",\"heartbeat_age_s\":",
                      absl::StrFormat("%.3f", absl::ToDoubleSeconds(ages[key])),
                      "}");
    }
    js += "]}";
  }
  js += "]\n";
  return json ? js : text;
}

}  // namespace distjob
