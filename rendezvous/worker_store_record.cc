#include "rendezvous/worker_store_record.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace distjob {

// "<round> agent <addr> <members_only 0|1> <admitted> <unresolved>" or
// "<round> worker[ <opted_out_by>]" (the setting may hold spaces: last).
std::string EncodeWorkerStoreRecord(const WorkerStoreRecord& r) {
  if (!r.agent) {
    return absl::StrCat(r.round, " worker", r.opted_out_by.empty() ? "" : " ",
                        r.opted_out_by);
  }
  return absl::StrCat(r.round, " agent ", r.addr, " ", r.members_only ? 1 : 0,
                      " ", r.admitted, " ", r.unresolved);
}

std::optional<WorkerStoreRecord> DecodeWorkerStoreRecord(
    absl::string_view value) {
  WorkerStoreRecord r;
  // Each field up to the next space; the worker record's last one is the
  // rest of the line.
  auto next = [&value]() {
    const size_t space = value.find(' ');
    const absl::string_view field = value.substr(0, space);
    value.remove_prefix(space == value.npos ? value.size() : space + 1);
    return field;
  };
  if (!absl::SimpleAtoi(next(), &r.round)) return std::nullopt;
  const absl::string_view kind = next();
  if (kind == "worker") {
    r.opted_out_by = std::string(value);
    return r;
  }
  r.addr = std::string(next());
  int members_only = 0;
  if (kind != "agent" || r.addr.empty() ||
      !absl::SimpleAtoi(next(), &members_only) ||
      !absl::SimpleAtoi(next(), &r.admitted) ||
      !absl::SimpleAtoi(value, &r.unresolved)) {
    return std::nullopt;
  }
  r.agent = true;
  r.members_only = members_only != 0;
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
