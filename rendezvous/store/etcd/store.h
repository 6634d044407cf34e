// StoreInterface over an etcd v3 cluster (etcd's gRPC API), so a job's
// rendezvous survives the loss of any one host. Every key lives under
// `<prefix>/<run_id>/kv/`. Keys written without a TTL are attached to one
// job-wide lease that every agent of the job keeps alive; the last agent to
// close revokes it, so a rerun with the same run id starts from an empty
// namespace (and a crashed job's keys vanish one lease TTL later). Keys
// written with a TTL get a fresh lease per write: they disappear when the
// writer stops heartbeating, judged by etcd's clock; writing such a key
// again with the value it holds renews its lease and wakes no watcher.
// Add's counters are conflict-free: an add of one is a single put of the
// counter's sequence key (under `<prefix>/<run_id>/ctr/`, whose version
// counts the adds), so thousands of nodes joining a round at once make one
// write each, not a race of compare-and-swaps (counter.h). Every
// read of a counter (get, compare-set, append, listing) takes its count from
// that sequence in the same transaction, so it is exact; an add retried after
// a transport failure counts once (each add carries a marker key of its own).
// A request of more keys than etcd's --max-txn-ops (default 128) goes as
// several transactions of at most 128 operations, each atomic on its own (the
// rendezvous writes what it reads through one compare-set after such writes).
//
// The parts, each in its own unit of this package: options (what a user
// configures), members (channels and fail-over), leases and keepalive (the
// job lease and renewals), ttl_writes (heartbeats renewed, not rewritten),
// counter (Add), watch (blocking reads), keys (the namespace).
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_STORE_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

namespace etcd {
struct Hooks;
}  // namespace etcd

class EtcdStore : public StoreInterface {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdStore>> Connect(
      EtcdStoreOptions options);
  // Closes (see Close) if not closed yet.
  ~EtcdStore() override;

  // Cancels calls in flight (later ones fail at once), stops keeping
  // leases alive and revokes this agent's leases; the last agent of the
  // job also revokes the job lease, deleting every key.
  void Close() override;

  // Waits until some endpoint answers, for at most `timeout`; Unavailable
  // naming every endpoint otherwise.
  absl::Status WaitUntilReachable(absl::Duration timeout);

  [[nodiscard]] absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  [[nodiscard]] absl::StatusOr<int64_t> Add(const std::string& key,
                                            int64_t delta) override;
  [[nodiscard]] absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override;
  [[nodiscard]] absl::StatusOr<int64_t> Append(
      const std::string& key, const std::string& value) override;
  [[nodiscard]] absl::StatusOr<bool> Check(
      const std::vector<std::string>& keys) override;
  [[nodiscard]] absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override;
  [[nodiscard]] absl::StatusOr<int64_t> NumKeys() override;
  // The whole range in one page: etcd bounds its own responses
  // (--max-request-bytes, the client's message size).
  [[nodiscard]] absl::StatusOr<StoreListing> ListPage(
      const std::string& prefix, const std::string& start_after,
      size_t limit) override;
  [[nodiscard]] absl::StatusOr<WatchResult> WatchAny(
      const std::vector<std::string>& prefixes, int64_t after_revision,
      absl::Duration timeout) override;

 private:
  friend class EtcdStoreTesting;  // testing.h: Connect with hooks
  struct Impl;
  static absl::StatusOr<std::unique_ptr<EtcdStore>> ConnectWithHooks(
      EtcdStoreOptions options, etcd::Hooks hooks);
  explicit EtcdStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_STORE_H_
