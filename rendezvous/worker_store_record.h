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

#include "absl/strings/string_view.h"

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

// One line of text, as the master record: JSON would cost the size-limited
// binary a parser instantiation of its own.
std::string EncodeWorkerStoreRecord(const WorkerStoreRecord& record);
// nullopt when `value` is not such a record.
std::optional<WorkerStoreRecord> DecodeWorkerStoreRecord(
    absl::string_view value);

// The record in one line, for `status`'s table.
std::string WorkerStoreLine(const WorkerStoreRecord& record);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_WORKER_STORE_RECORD_H_
