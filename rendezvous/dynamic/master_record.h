// A round's master record: where its workers' rendezvous (MASTER_ADDR,
// MASTER_PORT) and their TCPStore are. Group rank 0 picks the port (its
// agent's workers' store, admitting the round's members, or a free one)
// and writes it with the workers' store record for `status`; every other
// member reads it.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_MASTER_RECORD_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_MASTER_RECORD_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

struct WorkerStoreRecord;  // rendezvous/worker_store_record.h

class MasterRecord {
 public:
  // What it uses of the facade's options (DynamicRendezvousOptions); the
  // pointers outlive it.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    std::string addr;  // this node's address: MASTER_ADDR as rank 0
    // nullptr: worker rank 0 hosts the workers' store.
    std::shared_ptr<WorkerStoreHost> worker_store;
    std::string worker_store_off;  // the setting that opted out
    int worker_store_port = 0;     // 0: a free port
    absl::Duration close_timeout;  // how long a member waits for it
    absl::Duration worker_store_resolve_timeout;
    // Set by the facade's Cancel: ends the admission's name lookups.
    const std::atomic<bool>* cancelled = nullptr;
  };

  explicit MasterRecord(Deps deps);
  MasterRecord(const MasterRecord&) = delete;
  MasterRecord& operator=(const MasterRecord&) = delete;

  // Group rank 0's: the port its workers' store listens at, then the
  // master record, with the workers' store record, in `r` and in the
  // store.
  absl::Status Write(const RdzvState& st, RendezvousResult* r);
  // Any other member's: the master record (`master` if already read) into
  // `r`; it stops this agent's workers' store, the new rank 0's now.
  absl::Status Read(const RdzvState& st,
                    const std::optional<absl::StatusOr<std::string>>& master,
                    RendezvousResult* r);

 private:
  // The port group rank 0's workers' store listens at (served by the
  // agent when worker_store, which then admits the round's members, noted
  // in `record`).
  absl::StatusOr<int> Port(const RdzvState& st, WorkerStoreRecord* record);

  const Deps d_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_MASTER_RECORD_H_
