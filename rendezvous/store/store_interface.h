// The rendezvous store as the rendezvous algorithm sees it: TCPStore's
// operations plus leases (TTL'd keys on the store's clock) and prefix
// watches. Implementations: the embedded gRPC store (GrpcStoreClient), an
// in-process store over StoreCore for tests (LocalStore), and later etcd v3.
#ifndef DISTJOB_RENDEZVOUS_STORE_STORE_INTERFACE_H_
#define DISTJOB_RENDEZVOUS_STORE_STORE_INTERFACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace distjob {

struct StoreEntry {
  std::string key;
  std::string value;
  int64_t revision = 0;
  absl::Duration age;       // since the last write, on the store's clock
  absl::Duration ttl_left;  // zero: no TTL
};

struct StoreListing {
  std::vector<StoreEntry> entries;
  int64_t revision = 0;
  // A page of a listing: keys follow the last entry (ask again from it).
  bool more = false;
};

// AddThenRecord's answer: the counter's value after the add, and whether
// the record was written with it; LeaseThenAddRecord's also whether the
// lease was (an add that took effect is answered even when the lease
// write after it failed, so that the caller does not join twice).
struct AddRecordResult {
  int64_t count = 0;
  bool recorded = false;
  bool leased = false;
};

// AddRecordThenList's answer: the add's, and the listing read after it. An
// add that took effect is answered even when the read after it failed, so
// that the caller does not take a second place.
struct AddRecordListing {
  AddRecordResult add;
  absl::StatusOr<StoreListing> listing = StoreListing{};
};

struct CompareSetResult {
  std::string value;  // the value after the operation
  bool swapped = false;
};

// The one change that answered a watch: the key, and its value as written
// at `revision` (nullopt: the key was deleted or expired then).
struct WatchChange {
  std::string key;
  std::optional<std::string> value;
  int64_t revision = 0;
};

struct WatchResult {
  bool changed = false;
  int64_t revision = 0;  // the store's revision at the answer
  // Set only when the store knows this was the one change under the
  // watched prefixes after `after_revision` up to `revision`, so that a
  // watcher learns what changed without a read; unset when it cannot tell
  // (several changes, or a watch answered at once from the store's past).
  std::optional<WatchChange> change;
};

// Every call's result is [[nodiscard]]: a failed store call is handled, or
// its discard is a `(void)` with a comment saying why nothing depends on
// it. (ABSL_MUST_USE_RESULT expands to nothing under gcc.)
class StoreInterface {
 public:
  virtual ~StoreInterface() = default;

  // Sets every pair atomically; `ttl` > 0 makes them a lease that expires
  // unless written again within `ttl`.
  [[nodiscard]] virtual absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) = 0;
  [[nodiscard]] absl::StatusOr<int64_t> Set(
      const std::string& key, const std::string& value,
      absl::Duration ttl = absl::ZeroDuration()) {
    return MultiSet({{key, value}}, ttl);
  }
  // Blocks until every key exists (DeadlineExceeded after `timeout`); a
  // zero timeout does not block (NotFound).
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) = 0;
  [[nodiscard]] absl::StatusOr<std::string> Get(const std::string& key,
                                                absl::Duration timeout) {
    auto values = MultiGet({key}, timeout);
    if (!values.ok()) return values.status();
    return std::move((*values)[0]);
  }
  [[nodiscard]] absl::Status Wait(const std::vector<std::string>& keys,
                                  absl::Duration timeout) {
    return MultiGet(keys, timeout).status();
  }
  [[nodiscard]] virtual absl::StatusOr<int64_t> Add(const std::string& key,
                                                    int64_t delta) = 0;
  // Adds `delta` to `key`, then writes `record` at `record_prefix` followed
  // by the count in decimal: a joiner takes its place and writes its record
  // under it. The embedded store does both in one request, atomically (an
  // error writes neither); this default makes two, and an error after the
  // add answers recorded=false, for the caller to write the record again.
  [[nodiscard]] virtual absl::StatusOr<AddRecordResult> AddThenRecord(
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) {
    auto count = Add(key, delta);
    if (!count.ok()) return count.status();
    const bool recorded = !record_prefix.empty() &&
                          Set(absl::StrCat(record_prefix, *count), record).ok();
    return AddRecordResult{*count, recorded};
  }
  // Writes `lease` with `ttl` (as MultiSet does), then AddThenRecord: a
  // joiner renews its lease with its join. The embedded store does both in
  // one request; this default makes the MultiSet first. An error in the
  // lease write adds nothing.
  [[nodiscard]] virtual absl::StatusOr<AddRecordResult> LeaseThenAddRecord(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record) {
    if (auto s = MultiSet(lease, ttl); !s.ok()) return s.status();
    auto r = AddThenRecord(key, delta, record_prefix, record);
    if (r.ok()) r->leased = true;
    return r;
  }
  // LeaseThenAddRecord (AddThenRecord when `lease` is empty), then List of
  // `list_prefix` as the store stands after it: a new node takes a place in
  // a job's first round and reads the round's state in one request
  // (DynamicRendezvous::Next). The embedded store does both in one request;
  // this default makes them two. Its revision is the listing's.
  [[nodiscard]] virtual absl::StatusOr<AddRecordListing> AddRecordThenList(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record,
      const std::string& list_prefix) {
    auto r = lease.empty() ? AddThenRecord(key, delta, record_prefix, record)
                           : LeaseThenAddRecord(lease, ttl, key, delta,
                                                record_prefix, record);
    if (!r.ok()) return r.status();
    return AddRecordListing{*r, List(list_prefix)};
  }
  [[nodiscard]] virtual absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) = 0;
  [[nodiscard]] virtual absl::StatusOr<int64_t> Append(
      const std::string& key, const std::string& value) = 0;
  [[nodiscard]] virtual absl::StatusOr<bool> Check(
      const std::vector<std::string>& keys) = 0;
  [[nodiscard]] virtual absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) = 0;
  [[nodiscard]] virtual absl::StatusOr<int64_t> NumKeys() = 0;
  // One page of the keys under `prefix` that sort after `start_after`
  // ("": from the first): at most `limit` entries (0: the store's page
  // size), fewer when the store's page is smaller; `more` when keys follow.
  [[nodiscard]] virtual absl::StatusOr<StoreListing> ListPage(
      const std::string& prefix, const std::string& start_after,
      size_t limit) = 0;
  // Every key under `prefix`, page by page, so that the store never copies
  // a whole listing at once. The revision is the first page's: a watch
  // from it sees every change made while the pages were read.
  [[nodiscard]] absl::StatusOr<StoreListing> List(const std::string& prefix) {
    auto page = ListPage(prefix, "", 0);
    if (!page.ok()) return page;
    return ListRest(prefix, *std::move(page));
  }
  // The listing whose first page is `first`: the pages after it, read.
  [[nodiscard]] absl::StatusOr<StoreListing> ListRest(const std::string& prefix,
                                                      StoreListing first) {
    if (!first.more) return first;
    StoreListing all = std::move(first);
    bool more = all.more && !all.entries.empty();
    all.more = false;
    while (more) {
      auto next = ListPage(prefix, all.entries.back().key, 0);
      if (!next.ok()) return next.status();
      more = next->more && !next->entries.empty();
      for (auto& e : next->entries) all.entries.push_back(std::move(e));
    }
    return all;
  }
  // Cancels calls in flight and fails later ones at once: a leaving agent
  // must not wait out read_timeout on a store that is already gone.
  virtual void Close() {}
  // Answers once a key under any of `prefixes` changed after
  // `after_revision` (changed=true, the store's revision), or with
  // changed=false at `timeout`. Several prefixes in one parked call let a
  // watcher follow a few keys of a busy prefix (one lease among thousands)
  // without being woken by the others.
  [[nodiscard]] virtual absl::StatusOr<WatchResult> WatchAny(
      const std::vector<std::string>& prefixes, int64_t after_revision,
      absl::Duration timeout) = 0;
  // WatchAny of one prefix: {changed, revision}.
  [[nodiscard]] absl::StatusOr<std::pair<bool, int64_t>> Watch(
      const std::string& prefix, int64_t after_revision,
      absl::Duration timeout) {
    auto w = WatchAny({prefix}, after_revision, timeout);
    if (!w.ok()) return w.status();
    return std::make_pair(w->changed, w->revision);
  }
};

// While in scope, no call a remote store client makes on this thread runs
// past `deadline`, whatever its own timeout: the rendezvous join keeps to
// join_timeout even when each call would otherwise wait read_timeout for
// a store that does not answer. Nested scopes replace the outer one until
// they end (absl::InfiniteFuture() lifts it).
class ScopedCallDeadline {
 public:
  explicit ScopedCallDeadline(absl::Time deadline) : previous_(current_) {
    current_ = deadline;
  }
  ~ScopedCallDeadline() { current_ = previous_; }
  ScopedCallDeadline(const ScopedCallDeadline&) = delete;
  ScopedCallDeadline& operator=(const ScopedCallDeadline&) = delete;

  // This thread's deadline, absl::InfiniteFuture() when none.
  static absl::Time Current() { return current_; }

 private:
  static inline thread_local absl::Time current_ = absl::InfiniteFuture();
  const absl::Time previous_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_STORE_INTERFACE_H_
