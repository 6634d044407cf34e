// The record of who serves the workers' TCPStore, written by group rank 0
// each round under rdzv/<run_id>/worker-store (rdzv_keys.h) and shown by
// `distjob-agent status`: an SRE sees whether the agent serves the store
// (or which setting handed it to worker rank 0), its address, and whether
// only the round's members may connect.
#ifndef DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_
#define DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "rendezvous/rendezvous.h"

namespace distjob {

struct WorkerStoreRecord {
  int64_t round = 0;
  // Group rank 0's agent serves it; false: worker rank 0 does.
  bool agent = false;
  // agent: where it serves (MASTER_ADDR, MASTER_PORT).
  std::string host;
  int port = 0;
  // agent: who may connect (AllowMembers' answer).
  MemberAdmission admission;
  // Not agent: the setting that opted out ("--worker-store worker").
  std::string opted_out_by;
};

// The record as stored: one JSON object.
std::string EncodeWorkerStoreRecord(const WorkerStoreRecord& record);

// The stored value as `status --json` shows it: the object, its fields
// checked. InvalidArgument when it is not such a record.
absl::StatusOr<Json> ParseWorkerStoreRecord(absl::string_view value);

// One line for `status`'s table, from ParseWorkerStoreRecord's object.
std::string WorkerStoreLine(const Json& record);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_
