// The record of who serves the workers' TCPStore, written by group rank 0
// each round under rdzv/<run_id>/worker-store (rdzv_keys.h) and shown by
// `distjob-agent status`: an SRE sees whether the agent serves the store
// (or which setting handed it to worker rank 0), its address, and whether
// only the round's members may connect.
#ifndef DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_
#define DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace distjob {

struct WorkerStoreRecord {
  int64_t round = 0;
  // Group rank 0's agent serves it; false: worker rank 0 does.
  bool agent = false;
  // agent: where ("MASTER_ADDR:MASTER_PORT", an IPv6 address bracketed)
  // and who may connect (WorkerStoreHost::AllowMembers' answer).
  std::string addr;
  bool members_only = false;
  int64_t admitted = 0;
  int64_t unresolved = 0;
  // Not agent: the setting that opted out ("--worker-store worker").
  std::string opted_out_by;
};

// The record as a JSON object, the one shape both the store and `status
// --json` hold: {"round", "served_by": "agent"|"worker", then for agent
// "addr", "members_only", "members_admitted", "members_unresolved", for
// worker "opted_out_by"}.
Json WorkerStoreJson(const WorkerStoreRecord& record);

// WorkerStoreJson on one line, the store's value.
std::string EncodeWorkerStoreRecord(const WorkerStoreRecord& record);
// DataLoss naming the key that is missing or of the wrong type (or saying
// that `value` is not a JSON object); keys it does not know are ignored.
absl::StatusOr<WorkerStoreRecord> DecodeWorkerStoreRecord(
    absl::string_view value);

// The record in one line, for `status`'s table.
std::string WorkerStoreLine(const WorkerStoreRecord& record);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_
