#include "rendezvous/standalone_rendezvous.h"

#include <sys/random.h>

#include "common/net.h"

namespace distjob {

StandaloneRendezvous::StandaloneRendezvous(
    std::string master_addr, std::string run_id,
    std::shared_ptr<WorkerStoreHost> worker_store, int master_port)
    : master_addr_(master_addr.empty() ? "127.0.0.1" : std::move(master_addr)),
      run_id_(run_id.empty() ? RandomRunId() : std::move(run_id)),
      worker_store_(std::move(worker_store)),
      master_port_(master_port) {
  // No AllowMembers: a one-node job's store stays open (only an elastic
  // round has members to admit; agent/agent_loop.cc).
}

absl::StatusOr<RendezvousResult> StandaloneRendezvous::Next(
    int local_world_size) {
  absl::StatusOr<int> port =
      worker_store_ != nullptr
          ? worker_store_->Serve(master_addr_, master_port_)
      : master_port_ != 0 ? absl::StatusOr<int>(master_port_)
                          : FindFreePort(master_addr_);
  if (!port.ok()) return port.status();
  // Every worker of the last attempt has exited, and 2.x clients put no
  // per-attempt prefix on their keys (PyTorch 2.11's _create_c10d_store in
  // torch/distributed/rendezvous.py): left, the last attempt's gloo
  // addresses would be read as the new ranks' and init_process_group would
  // hang on them.
  if (worker_store_ != nullptr) {
    if (absl::Status s = worker_store_->Clear(); !s.ok()) return s;
  }
  RendezvousResult r;
  r.round = round_++;
  r.group_rank = 0;
  r.group_world_size = 1;
  r.base_rank = 0;
  r.world_size = local_world_size;
  r.master_addr = master_addr_;
  r.master_port = *port;
  r.run_id = run_id_;
  r.use_agent_store = worker_store_ != nullptr;
  return r;
}

std::string RandomRunId() {
  unsigned char bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

}  // namespace distjob
