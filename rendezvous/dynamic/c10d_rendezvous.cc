#include "rendezvous/dynamic/c10d_rendezvous.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/net.h"
#include "rendezvous/dynamic/dynamic_rendezvous.h"
#include "rendezvous/host_store_limits.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/store/etcd/store.h"
#include "rendezvous/store/grpc_store_client.h"
#include "rendezvous/store/server/store_server.h"

namespace distjob {
std::string LocalNodeAddress(const std::string& local_addr) {
  if (!local_addr.empty()) return local_addr;
  // torchrun's socket.getfqdn(): under a headless Service the bare pod name
  // does not resolve from the other pods, its FQDN does.
  const std::string fqdn = LocalFqdn();
  return fqdn.empty() ? "127.0.0.1" : fqdn;
}

namespace {

// This node in an elastic rendezvous, whichever store it runs over.
DynamicRendezvousOptions NodeOptions(const RendezvousParams& p) {
  DynamicRendezvousOptions options;
  options.run_id = p.run_id;
  options.key_run_id = p.key_run_id;
  options.min_nodes = p.min_nodes;
  options.max_nodes = p.max_nodes;
  options.addr = LocalNodeAddress(p.local_addr);
  options.node = absl::StrCat(options.addr, "-", getpid());
  options.pod_index = p.pod_index;
  options.order_key = p.order_key;
  options.config = p.config;
  options.worker_store = p.worker_store;
  options.worker_store_off = p.worker_store_off;
  if (p.max_nodes == 1 && p.master_port_given) {
    options.worker_store_port = p.master_port;
  }
  return options;
}

}  // namespace

absl::StatusOr<RendezvousResult> StaticRendezvous::Next(int local_world_size) {
  RendezvousResult r;
  r.round = round_++;
  r.group_rank = node_rank_;
  r.group_world_size = nnodes_;
  r.base_rank = node_rank_ * local_world_size;
  r.world_size = nnodes_ * local_world_size;
  r.master_addr = master_addr_;
  r.master_port = master_port_;
  r.run_id = run_id_;
  if (worker_store_ != nullptr) {
    // The other nodes' addresses are not known here: the store is open to
    // the network, as torchrun's static TCPStore.
    if (node_rank_ == 0) {
      auto port = worker_store_->Serve("::", master_port_);
      if (!port.ok()) return port.status();
      // Not cleared between attempts, unlike a one-node job's
      // (StandaloneRendezvous::Next): the other nodes restart their workers
      // when they see the failure, unsynchronised, so no moment is safe.
      // docs/worker-store.md sends restarting multi-node jobs to
      // --rdzv-backend c10d, whose rounds clear it.
    }
    r.use_agent_store = true;
  }
  if (node_rank_ != 0) {
    // The workers wait for the master silently (torch's TCPStore client).
    master_watch_.reset();
    master_watch_ = std::make_unique<MasterWatch>(master_addr_, master_port_);
  }
  return r;
}

void StaticRendezvous::Shutdown(bool succeeded) {
  (void)succeeded;
  master_watch_.reset();
}

namespace {

// torchrun's static rendezvous: a fixed --nnodes and this node's rank.
absl::StatusOr<std::unique_ptr<Rendezvous>> MakeStatic(
    const RendezvousParams& p) {
  if (p.node_rank >= p.max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node-rank ", p.node_rank, " is not below --nnodes ", p.max_nodes));
  }
  if (p.min_nodes != p.max_nodes) {
    return absl::InvalidArgumentError(
        "--rdzv-backend static needs a fixed --nnodes N, not MIN:MAX");
  }
  return std::make_unique<StaticRendezvous>(p.node_rank, p.max_nodes,
                                            p.master_addr, p.master_port,
                                            p.run_id, p.worker_store);
}

// The store server of a c10d rendezvous, when this node hosts it: it is
// the endpoint (or --rdzv-conf is_host says so) and not a launcher that
// took over from an outer agent. nullptr when another node hosts it.
absl::StatusOr<std::shared_ptr<StoreServer>> HostStore(
    const RendezvousParams& p, const DynamicRendezvousOptions& options) {
  const Endpoint& endpoint = p.endpoint;
  const RdzvConfig& config = p.config;
  // A launcher that took over from an outer agent uses the outer's store
  // (its keys under key_run_id), which the outer keeps serving: it never
  // hosts one, whatever is_host says.
  const bool taken_over = !p.key_run_id.empty() && p.key_run_id != p.run_id;
  const bool try_host =
      !taken_over && config.is_host.value_or(IsLocalHost(endpoint.host));
  if (!try_host) return nullptr;
  std::string bind = endpoint.host;
  if (bind == "localhost") bind = "127.0.0.1";
  if (!IsIpLiteral(bind)) {
    // A name: listen where this node says it is, else everywhere.
    bind = IsIpLiteral(options.addr) ? options.addr : "::";
  }
  // The parked-wait budget grows with the job (host_store_limits.h); the
  // keys of --rdzv-conf set the rest, and never lower it below that.
  StoreLimits limits = HostStoreLimits(p.max_nodes);
  limits.max_total_bytes = static_cast<size_t>(config.store_max_memory_mb)
                           << 20;
  limits.max_value_bytes = static_cast<size_t>(config.store_max_value_kb) << 10;
  limits.max_waiters = std::max(limits.max_waiters,
                                static_cast<size_t>(config.store_max_parked));
  ConnLimits conns;
  conns.max_conns = static_cast<size_t>(config.store_max_conns);
  conns.max_conns_per_peer =
      static_cast<size_t>(config.store_max_conns_per_peer);
  auto started =
      StoreServer::Start(bind, endpoint.port, limits, p.security, conns);
  if (started.ok()) return std::shared_ptr<StoreServer>(std::move(*started));
  if (config.is_host.value_or(false)) return started.status();
  DJ_LOG_INFO("not hosting the store ({}); joining {}",
              started.status().message(), endpoint.ToString());
  return nullptr;
}

// The c10d rendezvous: the store this node hosts, or a client of the
// endpoint's.
absl::StatusOr<std::unique_ptr<Rendezvous>> MakeC10d(
    const RendezvousParams& p) {
  const Endpoint& endpoint = p.endpoint;
  DynamicRendezvousOptions options = NodeOptions(p);
  if (options.worker_store_port == endpoint.port) {
    // torchrun shares that port's store with the workers; this agent's
    // rendezvous store is not a TCPStore (docs/worker-store.md).
    DJ_LOG_INFO(
        "--master-port {} is the rendezvous endpoint's port: the workers' "
        "store listens on a free port instead",
        options.worker_store_port);
    options.worker_store_port = 0;
  }
  auto server = HostStore(p, options);
  if (!server.ok()) return server.status();
  std::unique_ptr<StoreInterface> store;
  if (*server != nullptr) {
    options.hosting = true;
    // Weak: a scrape racing the rendezvous' end must not keep the store up.
    options.store_stats = [weak = std::weak_ptr<StoreServer>(
                               *server)]() -> std::optional<StoreStats> {
      auto alive = weak.lock();
      if (alive == nullptr) return std::nullopt;
      return alive->Stats();
    };
    store = std::make_unique<LocalStore>((*server)->core());
    if (auto s = store->Set(RdzvKeys(p.run_id).Host(), options.node); !s.ok()) {
      return s.status();
    }
  } else {
    DJ_LOG_INFO("joining the rendezvous store at {}", endpoint.ToString());
    store = GrpcStoreClient::Connect(endpoint.ToString(), p.config.read_timeout,
                                     p.security);
  }
  return std::unique_ptr<Rendezvous>(new DynamicRendezvous(
      std::move(options), std::move(store), *std::move(server)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Rendezvous>> MakeRendezvousFor(
    const RendezvousParams& p) {
  if (p.backend == RdzvBackend::kStatic) return MakeStatic(p);
  if (p.backend == RdzvBackend::kEtcd || p.backend == RdzvBackend::kEtcdV3) {
    // Same algorithm, external store: no host, every node a client.
    auto store = EtcdStore::Connect(p.etcd);
    if (!store.ok()) return store.status();
    DJ_LOG_INFO("rendezvous over etcd at {}",
                absl::StrJoin(p.etcd.endpoints, ","));
    return std::unique_ptr<Rendezvous>(
        new DynamicRendezvous(NodeOptions(p), std::move(*store)));
  }
  return MakeC10d(p);
}

}  // namespace distjob
