// The state of the rendezvous store and its operations, independent of the
// transport. Blocking operations (get/wait, watch) take a callback instead
// of a thread: they are parked as waiters and answered by whichever write,
// expiry or deadline resolves them, so thousands of blocked clients cost a
// few hundred bytes each. Parked waiters are indexed by what can answer
// them (a get by one key it still misses, a watch by its prefix), so a
// write costs O(log n) plus the waiters it answers, not a pass over every
// waiter and every key under every watched prefix. One timer thread expires
// leases and waiters from ordered queues, on a monotonic clock of this
// process (a StoreClock: steady_clock, or a test's).
#ifndef DISTJOB_RENDEZVOUS_STORE_STORE_CORE_H_
#define DISTJOB_RENDEZVOUS_STORE_STORE_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/store/store_clock.h"
#include "rendezvous/store/store_interface.h"
#include "rendezvous/store/store_stats.h"

namespace distjob {

// What one store may hold and what one request may ask; docs/rendezvous.md
// lists them with the limits. Over a limit: RESOURCE_EXHAUSTED (or
// INVALID_ARGUMENT for a request that can never succeed), naming the limit.
struct StoreLimits {
  size_t max_key_bytes = 4096;  // keys, and prefixes of listings and watches
  size_t max_value_bytes = 1 << 20;
  size_t max_keys_per_request = 4096;
  // Prefixes of one watch: each new one costs a scan of the data under the
  // store's lock, so one request must not name thousands (the rendezvous
  // monitor names at most 3, rendezvous/dynamic/).
  size_t max_watch_prefixes = 8;
  // The data the store holds, with its bookkeeping: keys and values with
  // their map and lease nodes, and tombstones.
  size_t max_total_bytes = size_t{256} << 20;
  // Parked gets and watches, apart from the data so that neither can
  // starve the other: each with its keys, index entries and `call_bytes`.
  size_t max_waiter_bytes = size_t{64} << 20;
  size_t max_waiters = 100000;
  // Parked gets and watches from one peer address (the gRPC server's).
  size_t max_waiters_per_peer = 8192;
  // What a parked wait costs outside the core (the server's gRPC call:
  // request, response, reactor, call arena), counted against
  // max_waiter_bytes with the wait.
  size_t call_bytes = 0;
  // Longer get and watch timeouts (an infinite one from an in-process
  // caller included) are cut to this; the wait then ends as at its
  // deadline. A timeout of zero or less parks nothing: a get is answered
  // NotFound and a watch "unchanged" at once.
  absl::Duration max_timeout = absl::Hours(1);
  // One page of a listing: at most this many entries and (past its first
  // entry) this many bytes of keys and values; the caller asks for the
  // next page from the last key it got.
  size_t max_list_entries = 1024;
  size_t max_list_bytes = size_t{4} << 20;
  // Tombstones (revisions of deleted or expired keys) kept for watches that
  // start from a revision before the deletion; past this many the oldest
  // are dropped, and a watch from before the newest dropped one is answered
  // "changed" at once (the caller relists), as etcd answers a compacted
  // revision.
  size_t max_tombstones = 65536;
  // Read by the gRPC server (store_server.cc), not the core: how many
  // completion queues, each with its own thread, serve the calls. gRPC
  // assigns each connection to one. Debian's libgrpc is built without
  // NDEBUG, and there each completion scans its queue's list of calls in
  // flight (cq_check_tag), so one queue under thousands of parked waits
  // makes a round of N nodes cost O(N^2); more queues split that list, at
  // the price of a thread hand-off per call when the thread that reads a
  // connection is not its queue's. HostStoreLimits sizes it to the job.
  size_t completion_queues = 1;
  // How long a completion-queue thread polls for the next call after its
  // last one before it sleeps, while calls come that close together
  // (common/busy_poll.h): a client that sends requests back to back then
  // does not pay a thread's wake-up per request. Zero: never polls.
  absl::Duration busy_poll = absl::Microseconds(150);
};

class StoreCore {
 public:
  using TimePoint = StoreClock::TimePoint;
  using GetCallback =
      std::function<void(absl::StatusOr<std::vector<std::string>>)>;
  using WatchCallback =
      std::function<void(absl::StatusOr<std::pair<bool, int64_t>>)>;
  using WatchAnyCallback = std::function<void(absl::StatusOr<WatchResult>)>;

  // What the store counts in max_total_bytes beyond the bytes of keys,
  // values and the keys of waits. A red-black tree node is its value plus
  // three pointers and a color; each heap block costs malloc's 16-byte
  // header and rounding besides (kSlack per block).
  static constexpr size_t kTreeNode = 4 * sizeof(void*);
  static constexpr size_t kSlack = 16;
  // A key: its data_ node (the key, and a Value: the value's string
  // header, a revision, two time points, a lease iterator), the lease node
  // a key may have, and the heap blocks of key and value.
  static constexpr size_t kKeyOverhead =
      kTreeNode + 2 * sizeof(std::string) + 4 * sizeof(int64_t) + kTreeNode +
      sizeof(std::pair<StoreClock::TimePoint, const std::string*>) + 4 * kSlack;
  // A tombstone: its deleted_at_ and tombstones_ nodes and the key's block.
  static constexpr size_t kTombstoneOverhead =
      2 * kTreeNode + sizeof(std::string) + 2 * sizeof(int64_t) +
      sizeof(void*) + 3 * kSlack;
  // A parked wait beyond its keys: its waiters_ node (the Waiter with two
  // std::function inside), its deadline node, its index entry (a set node,
  // or a hash slot and a set), the callback's captured state.
  static constexpr size_t kWaiterOverhead = 640;
  // What a parked call costs gRPC (its call arena, the request and
  // response, the call object), which the store's gRPC server counts with
  // its wait (StoreLimits::call_bytes): an upper estimate, so that the
  // waits' memory limit holds for gRPC's share too.
  static constexpr size_t kServerCallBytes = 8192;
  // What a parked wait on `keys` (a get) or `prefix` (a watch) counts:
  // each key twice (the wait and its index entry).
  static size_t WaiterBytes(const std::vector<std::string>& keys,
                            const std::string& prefix, size_t call_bytes);

  // `clock` must outlive the core.
  explicit StoreCore(StoreLimits limits = {},
                     StoreClock* clock = MonotonicStoreClock());
  ~StoreCore();
  StoreCore(const StoreCore&) = delete;
  StoreCore& operator=(const StoreCore&) = delete;

  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl);
  // `done` runs exactly once, possibly on this thread before returning.
  // Returns the ticket of the parked wait (for Cancel), or 0 when `done`
  // already ran or is about to run without parking.
  uint64_t MultiGet(const std::vector<std::string>& keys,
                    absl::Duration timeout, GetCallback done);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // StoreInterface::AddThenRecord, atomically: an error writes neither key
  // (an empty `record_prefix`: no record). A record key that is the
  // counter's own is refused.
  absl::StatusOr<int64_t> AddThenRecord(const std::string& key, int64_t delta,
                                        const std::string& record_prefix,
                                        const std::string& record);
  absl::StatusOr<CompareSetResult> CompareSet(const std::string& key,
                                              const std::string& expected,
                                              const std::string& desired);
  absl::StatusOr<int64_t> Append(const std::string& key,
                                 const std::string& value);
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys);
  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& keys);
  int64_t NumKeys();
  // The page of keys under `prefix` after `start_after` ("": from the
  // first), at most `limit` entries (0 or more than max_list_entries:
  // max_list_entries) and max_list_bytes; `more` when keys follow it.
  absl::StatusOr<StoreListing> List(const std::string& prefix,
                                    const std::string& start_after = "",
                                    size_t limit = 0);
  // As MultiGet: `done` runs exactly once; returns the wait's ticket or 0.
  // A parked watch woken by one change under its prefixes, the only one up
  // to the answer's revision, is told that change (WatchResult::change).
  uint64_t WatchAny(const std::vector<std::string>& prefixes,
                    int64_t after_revision, absl::Duration timeout,
                    WatchAnyCallback done);
  uint64_t Watch(const std::string& prefix, int64_t after_revision,
                 absl::Duration timeout, WatchCallback done);
  // Ends the parked wait `ticket` (its caller went away): its callback runs
  // with Cancelled, on this thread, and its memory is freed. A ticket that
  // was already answered is ignored.
  void Cancel(uint64_t ticket);

  // Answers every parked waiter, and every later blocking call, with
  // Cancelled (server shutdown).
  void CancelAll();

  // Keys, bytes, parked waits and lease expiries now (requests are the
  // server's: StoreServer::Stats).
  StoreStats Stats();

 private:
  using WaiterId = uint64_t;
  // Lease deadline -> key (the key string inside data_, whose map nodes do
  // not move), so the timer finds due leases without a pass over all keys.
  using Leases = std::multimap<TimePoint, const std::string*>;
  struct Value {
    std::string data;
    int64_t revision = 0;
    TimePoint written;
    TimePoint expires = TimePoint::max();
    Leases::iterator lease;  // valid while `expires` is finite
  };
  struct Waiter {
    bool is_watch = false;
    std::vector<std::string> keys;      // get
    size_t missing = 0;                 // get: index of the key it is parked on
    std::vector<std::string> prefixes;  // watch
    int64_t after_revision = 0;
    TimePoint deadline;
    size_t bytes = 0;  // what it counts in total_bytes_
    GetCallback get_done;
    WatchAnyCallback watch_done;
  };
  struct WatchedPrefix {
    // The newest revision of a write or erase of a key under the prefix
    // (at least tombstone_floor_ when tracking began), so a new watch
    // learns whether it is already answered without a scan.
    int64_t max_revision = 0;
    // Parked watches, by (after_revision, id): a change at revision r
    // answers exactly those with after_revision < r, a head of the set.
    std::set<std::pair<int64_t, WaiterId>> waiters;
  };
  using Ready = std::vector<std::function<void()>>;

  // `d` from now, at most max_timeout (for waits) away.
  TimePoint DeadlineAfter(absl::Duration d) const;
  TimePoint WaitDeadline(absl::Duration d) const;
  absl::Duration Since(TimePoint t) const;
  absl::Status CheckKey(const std::string& key) const;
  absl::Status CheckKeys(const std::vector<std::string>& keys) const;
  // Whether `add` more bytes fit under max_total_bytes once `freed` are
  // released, dropping the oldest tombstones to make room.
  absl::Status CheckRoom(size_t add, size_t freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckValueSize(size_t size) const;
  absl::Status CheckValue(const std::string& key, size_t old_size,
                          size_t new_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Parks `w` unless the store is closed or full; otherwise queues its
  // answer into `ready`. Returns its ticket or 0.
  uint64_t ParkOrRefuse(Waiter w, Ready* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Write(const std::string& key, std::string data, TimePoint exp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetExpiry(std::map<std::string, Value>::iterator it, TimePoint exp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Erase(std::map<std::string, Value>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropOldestTombstones() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropOldestTombstone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that `key` changed at `revision` (written when `written`, else
  // erased) and queues the parked waiters that the change may answer.
  void NoteChange(const std::string& key, int64_t revision, bool written)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers (into `ready`) or re-parks the waiters NoteChange queued.
  void Resolve(Ready* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A get: moves its answer into `ready` if all its keys exist; otherwise
  // points w.missing at a key it still misses.
  bool TryAnswerGet(Waiter& w, Ready* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a key under `prefix` was written or erased after
  // `after_revision` (what answers a watch), without a scan once the
  // prefix is tracked.
  bool ChangedSince(const std::vector<std::string>& prefixes,
                    int64_t after_revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `change` (key, revision), which woke the watch `w`, if it is the only
  // change under w's prefixes up to now; else nullopt.
  std::optional<WatchChange> OnlyChange(
      const Waiter& w, const std::pair<std::string, int64_t>& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The prefix's entry in prefixes_, made with one scan if it has none.
  WatchedPrefix& TrackPrefix(const std::string& prefix)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropIdlePrefixes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WaiterId Park(Waiter w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a waiter and its index entries; returns it for answering.
  Waiter Unpark(std::map<WaiterId, Waiter>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  const StoreLimits limits_;
  StoreClock* const clock_;
  absl::Mutex mu_;
  std::map<std::string, Value> data_ ABSL_GUARDED_BY(mu_);
  Leases leases_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> deleted_at_ ABSL_GUARDED_BY(mu_);
  // deleted_at_ by revision, oldest first, for dropping the oldest.
  std::map<int64_t, const std::string*> tombstones_ ABSL_GUARDED_BY(mu_);
  // The newest revision of a dropped tombstone: changes at or before it may
  // have left no trace.
  int64_t tombstone_floor_ ABSL_GUARDED_BY(mu_) = 0;
  // Parked waiters by id; ids grow, so this is arrival order.
  std::map<WaiterId, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  WaiterId next_waiter_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::pair<TimePoint, WaiterId>> deadlines_ ABSL_GUARDED_BY(mu_);
  // Parked gets by the one key each is parked on (a key it misses).
  absl::flat_hash_map<std::string, std::set<WaiterId>> gets_by_key_
      ABSL_GUARDED_BY(mu_);
  // Prefixes with parked watches, or asked about recently; std::less<> for
  // lookups by a key's leading part (see NoteChange).
  std::map<std::string, WatchedPrefix, std::less<>> prefixes_
      ABSL_GUARDED_BY(mu_);
  size_t idle_prefixes_ ABSL_GUARDED_BY(mu_) = 0;  // with no parked watch
  // Waiters NoteChange queued for the next Resolve, each with the index in
  // changes_ of the change that woke it (kNoChange for a get).
  static constexpr size_t kNoChange = static_cast<size_t>(-1);
  std::vector<std::pair<WaiterId, size_t>> woken_ ABSL_GUARDED_BY(mu_);
  // The key and revision of each change that woke a watch since the last
  // Resolve.
  std::vector<std::pair<std::string, int64_t>> changes_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Data and tombstones with their overhead (StoreLimits).
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Parked waits with their overhead.
  size_t waiter_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lease_expiries_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

// StoreInterface over a StoreCore in this process: the fake for unit tests
// and the host's own view of the store it serves (no loopback RPC).
class LocalStore : public StoreInterface {
 public:
  explicit LocalStore(StoreCore* core) : core_(core) {}
  [[nodiscard]] absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    return core_->MultiSet(kvs, ttl);
  }
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  [[nodiscard]] absl::StatusOr<int64_t> Add(const std::string& key,
                                            int64_t delta) override {
    return core_->Add(key, delta);
  }
  [[nodiscard]] absl::StatusOr<AddRecordResult> AddThenRecord(
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) override {
    auto count = core_->AddThenRecord(key, delta, record_prefix, record);
    if (!count.ok()) return count.status();
    return AddRecordResult{*count, !record_prefix.empty()};
  }
  [[nodiscard]] absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override {
    return core_->CompareSet(key, expected, desired);
  }
  [[nodiscard]] absl::StatusOr<int64_t> Append(
      const std::string& key, const std::string& value) override {
    return core_->Append(key, value);
  }
  [[nodiscard]] absl::StatusOr<bool> Check(
      const std::vector<std::string>& keys) override {
    return core_->Check(keys);
  }
  [[nodiscard]] absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override {
    return core_->Delete(keys);
  }
  [[nodiscard]] absl::StatusOr<int64_t> NumKeys() override {
    return core_->NumKeys();
  }
  [[nodiscard]] absl::StatusOr<StoreListing> ListPage(
      const std::string& prefix, const std::string& start_after,
      size_t limit) override {
    return core_->List(prefix, start_after, limit);
  }
  [[nodiscard]] absl::StatusOr<WatchResult> WatchAny(
      const std::vector<std::string>& prefixes, int64_t after_revision,
      absl::Duration timeout) override;
  // Ends this view's blocking calls (MultiGet, Watch) in flight and fails
  // later ones at once with Cancelled; other calls still reach the core
  // (the host tells the others why it ends after it stopped waiting).
  void Close() override;

 private:
  // Runs `start` (which hands the core a callback and returns the core's
  // ticket) and waits for the first answer: the core's, or Close's, which
  // also cancels the parked wait.
  template <typename T>
  absl::StatusOr<T> Block(
      const std::function<uint64_t(std::function<void(absl::StatusOr<T>)>)>&
          start);

  StoreCore* core_;
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_call_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::function<void()>> cancels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_STORE_CORE_H_
