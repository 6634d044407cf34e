#include "rendezvous/worker_store_record.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace distjob {
namespace {

constexpr absl::string_view kWhat = "workers' store record";

absl::Status BadKey(absl::string_view key, absl::string_view want) {
  return absl::DataLossError(
      absl::StrCat(kWhat, ": key '", key, "' missing or not ", want));
}

absl::Status GetInt(const Json& object, const char* key, int64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) {
    return BadKey(key, "an integer");
  }
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status GetString(const Json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return BadKey(key, "a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetBool(const Json& object, const char* key, bool* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_boolean()) {
    return BadKey(key, "true or false");
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace

Json WorkerStoreJson(const WorkerStoreRecord& r) {
  Json j;
  j["round"] = r.round;
  j["served_by"] = r.agent ? "agent" : "worker";
  if (r.agent) {
    j["addr"] = r.addr;
    j["members_only"] = r.members_only;
    j["members_admitted"] = r.admitted;
    j["members_unresolved"] = r.unresolved;
  } else {
    j["opted_out_by"] = r.opted_out_by;
  }
  return j;
}

std::string EncodeWorkerStoreRecord(const WorkerStoreRecord& r) {
  return DumpJson(WorkerStoreJson(r));
}

absl::StatusOr<WorkerStoreRecord> DecodeWorkerStoreRecord(
    absl::string_view value) {
  auto parsed = ParseJson(value, kWhat);
  if (!parsed.ok()) return absl::DataLossError(parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) {
    return absl::DataLossError(absl::StrCat(kWhat, ": not a JSON object"));
  }
  WorkerStoreRecord r;
  if (auto s = GetInt(j, "round", &r.round); !s.ok()) return s;
  std::string served_by;
  if (auto s = GetString(j, "served_by", &served_by); !s.ok()) return s;
  if (served_by == "worker") {
    if (auto s = GetString(j, "opted_out_by", &r.opted_out_by); !s.ok()) {
      return s;
    }
    return r;
  }
  if (served_by != "agent") return BadKey("served_by", "agent or worker");
  r.agent = true;
  if (auto s = GetString(j, "addr", &r.addr); !s.ok()) return s;
  if (r.addr.empty()) return BadKey("addr", "a non-empty string");
  if (auto s = GetBool(j, "members_only", &r.members_only); !s.ok()) return s;
  if (auto s = GetInt(j, "members_admitted", &r.admitted); !s.ok()) return s;
  if (auto s = GetInt(j, "members_unresolved", &r.unresolved); !s.ok()) {
    return s;
  }
  return r;
}

std::string WorkerStoreLine(const WorkerStoreRecord& r) {
  if (!r.agent) {
    return absl::StrCat("worker rank 0 (round ", r.round, ")",
                        r.opted_out_by.empty() ? "" : ", opted out by ",
                        r.opted_out_by);
  }
  std::string line = absl::StrCat("served by the agent on ", r.addr, " (round ",
                                  r.round, "), ");
  if (!r.members_only) return line + "open to any peer (no rendezvous token)";
  absl::StrAppend(&line, "round members and loopback only (", r.admitted,
                  " admitted, ", r.unresolved, " unresolved)");
  return line;
}

}  // namespace distjob
