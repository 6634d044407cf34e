#include "rendezvous/worker_store_record.h"

#include "absl/strings/str_cat.h"

namespace distjob {

std::string EncodeWorkerStoreRecord(const WorkerStoreRecord& r) {
  Json js;
  js["round"] = r.round;
  js["served_by"] = r.agent ? "agent" : "worker";
  if (r.agent) {
    js["addr"] = r.host.find(':') == std::string::npos
                     ? absl::StrCat(r.host, ":", r.port)
                     : absl::StrCat("[", r.host, "]:", r.port);
    js["members_only"] = r.admission.members_only;
    js["members_admitted"] = r.admission.admitted;
    js["members_unresolved"] = r.admission.unresolved.size();
  } else {
    js["opted_out_by"] = r.opted_out_by;
  }
  return DumpJson(js);
}

absl::StatusOr<Json> ParseWorkerStoreRecord(absl::string_view value) {
  auto js = ParseJson(value, "the worker-store record");
  if (!js.ok()) return js.status();
  auto bad = [&value]() {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed worker-store record '", value, "'"));
  };
  if (!js->is_object() || !js->contains("round") ||
      !(*js)["round"].is_number_integer() || !js->contains("served_by")) {
    return bad();
  }
  const Json& by = (*js)["served_by"];
  if (by == "agent") {
    if (!js->contains("addr") || !(*js)["addr"].is_string() ||
        !js->contains("members_only") || !(*js)["members_only"].is_boolean() ||
        !js->contains("members_admitted") ||
        !(*js)["members_admitted"].is_number_integer() ||
        !js->contains("members_unresolved") ||
        !(*js)["members_unresolved"].is_number_integer()) {
      return bad();
    }
  } else if (by == "worker") {
    if (!js->contains("opted_out_by") || !(*js)["opted_out_by"].is_string()) {
      return bad();
    }
  } else {
    return bad();
  }
  return js;
}

std::string WorkerStoreLine(const Json& r) {
  const std::string round =
      absl::StrCat("(round ", r["round"].get<int64_t>(), ")");
  if (r["served_by"] != "agent") {
    const std::string by = r["opted_out_by"].get<std::string>();
    return absl::StrCat("worker rank 0 ", round,
                        by.empty() ? "" : absl::StrCat(", opted out by ", by));
  }
  std::string line = absl::StrCat("served by the agent on ",
                                  r["addr"].get<std::string>(), " ", round);
  if (!r["members_only"].get<bool>()) {
    return absl::StrCat(line, ", open to any peer (no rendezvous token)");
  }
  return absl::StrCat(line, ", round members and loopback only (",
                      r["members_admitted"].get<int64_t>(), " admitted, ",
                      r["members_unresolved"].get<int64_t>(), " unresolved)");
}

}  // namespace distjob
