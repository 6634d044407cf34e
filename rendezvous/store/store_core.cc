#include "rendezvous/store/store_core.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace distjob {
namespace {

// Watched prefixes with no parked watch kept for the next watch on them;
// see DropIdlePrefixes.
constexpr size_t kMaxIdlePrefixes = 1024;

}  // namespace

size_t StoreCore::WaiterBytes(const std::vector<std::string>& keys,
                              const std::string& prefix, size_t call_bytes) {
  size_t bytes = kWaiterOverhead + call_bytes + 2 * prefix.size();
  for (const auto& k : keys) bytes += sizeof(std::string) + 2 * k.size();
  return bytes;
}

StoreCore::TimePoint StoreCore::DeadlineAfter(absl::Duration d) const {
  if (d == absl::InfiniteDuration() || d > absl::Hours(24 * 365)) {
    return TimePoint::max();
  }
  return clock_->Now() + absl::ToChronoNanoseconds(d);
}

StoreCore::TimePoint StoreCore::WaitDeadline(absl::Duration d) const {
  return DeadlineAfter(std::min(d, limits_.max_timeout));
}

absl::Duration StoreCore::Since(TimePoint t) const {
  return absl::FromChrono(clock_->Now() - t);
}

StoreCore::StoreCore(StoreLimits limits, StoreClock* clock)
    : limits_(limits), clock_(clock) {
  timer_ = std::thread([this] { TimerLoop(); });
}

StoreCore::~StoreCore() {
  CancelAll();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  timer_.join();
}

absl::Status StoreCore::CheckKey(const std::string& key) const {
  if (key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key of ", key.size(), " bytes is over the limit (max_key_bytes) of ",
        limits_.max_key_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreCore::CheckKeys(const std::vector<std::string>& keys) const {
  if (keys.size() > limits_.max_keys_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        keys.size(),
        " keys in one request; the limit (max_keys_per_request) is ",
        limits_.max_keys_per_request));
  }
  for (const auto& k : keys) {
    if (auto s = CheckKey(k); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status StoreCore::CheckRoom(size_t add, size_t freed) {
  // Tombstones go first: dropping one costs at most a relist to a watch
  // from before it (DropOldestTombstones).
  while (total_bytes_ + add > limits_.max_total_bytes + freed &&
         !tombstones_.empty()) {
    DropOldestTombstone();
  }
  if (total_bytes_ + add > limits_.max_total_bytes + freed) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the store holds ", total_bytes_, " bytes and needs ", add,
        " more; its limit (max_total_bytes) is ", limits_.max_total_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreCore::CheckValueSize(size_t size) const {
  if (size > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value of ", size, " bytes is over the limit (max_value_bytes) of ",
        limits_.max_value_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreCore::CheckValue(const std::string& key, size_t old_size,
                                   size_t new_size) {
  if (auto s = CheckValueSize(new_size); !s.ok()) return s;
  // A new key costs its node and itself too.
  if (!data_.count(key))
    return CheckRoom(new_size + key.size() + kKeyOverhead, 0);
  return CheckRoom(new_size, old_size);
}

void StoreCore::Write(const std::string& key, std::string data, TimePoint exp) {
  auto [it, inserted] = data_.try_emplace(key);
  Value& v = it->second;
  total_bytes_ = total_bytes_ - v.data.size() + data.size();
  if (inserted) total_bytes_ += key.size() + kKeyOverhead;
  v.data = std::move(data);
  v.revision = ++revision_;
  v.written = clock_->Now();
  SetExpiry(it, exp);
  if (auto t = deleted_at_.find(key); t != deleted_at_.end()) {
    total_bytes_ -= t->first.size() + kTombstoneOverhead;
    tombstones_.erase(t->second);
    deleted_at_.erase(t);
  }
  NoteChange(key, v.revision, /*written=*/true);
}

void StoreCore::SetExpiry(std::map<std::string, Value>::iterator it,
                          TimePoint exp) {
  Value& v = it->second;
  if (v.expires != TimePoint::max()) leases_.erase(v.lease);
  v.expires = exp;
  if (exp != TimePoint::max()) {
    v.lease = leases_.emplace(exp, &it->first);
  }
}

void StoreCore::Erase(std::map<std::string, Value>::iterator it) {
  total_bytes_ -= it->first.size() + it->second.data.size() + kKeyOverhead;
  if (it->second.expires != TimePoint::max()) {
    leases_.erase(it->second.lease);
  }
  const int64_t rev = ++revision_;
  auto [t, inserted] = deleted_at_.try_emplace(it->first, rev);
  if (!inserted) {  // not expected: Write drops a key's tombstone
    tombstones_.erase(t->second);
    t->second = rev;
  } else {
    total_bytes_ += t->first.size() + kTombstoneOverhead;
  }
  tombstones_.emplace(rev, &t->first);
  NoteChange(it->first, rev, /*written=*/false);
  data_.erase(it);
  if (deleted_at_.size() > limits_.max_tombstones ||
      total_bytes_ > limits_.max_total_bytes) {
    DropOldestTombstones();
  }
}

void StoreCore::DropOldestTombstones() {
  // Parked watches never read tombstones (NoteChange answers them), and
  // watched prefixes keep their own newest revision: a tombstone is only
  // read when a watch on a prefix not tracked yet starts from a revision
  // before it. Keeping the newest max_tombstones serves any watch that
  // starts from a listing taken less than that many deletions ago;
  // TrackPrefix treats older ones as changed. They are also the one part
  // of the store's memory that can go without failing a request, so they
  // go first when a deletion leaves the store over max_total_bytes.
  while ((deleted_at_.size() > limits_.max_tombstones ||
          total_bytes_ > limits_.max_total_bytes) &&
         !tombstones_.empty()) {
    DropOldestTombstone();
  }
}

void StoreCore::DropOldestTombstone() {
  auto oldest = tombstones_.begin();
  tombstone_floor_ = std::max(tombstone_floor_, oldest->first);
  total_bytes_ -= oldest->second->size() + kTombstoneOverhead;
  deleted_at_.erase(*oldest->second);
  tombstones_.erase(oldest);
}

void StoreCore::NoteChange(const std::string& key, int64_t revision,
                           bool written) {
  // Find the watched prefixes that `key` starts with. Trying each watched
  // prefix would cost O(prefixes) per write, and there are as many as
  // nodes once each node watches a key of its own; looking up each leading
  // part of `key` would cost |key| lookups of up to |key| bytes. Instead
  // walk the ordered map down from `key`: the greatest entry p <= the
  // candidate either is a prefix of it (a match: go on with the candidates
  // shorter than p) or is not, and then every matching entry q is a prefix
  // of what p and the candidate have in common (a longer q would agree
  // with the candidate where p sorts lower, so p < q <= candidate), the
  // next candidate. Each lookup finds a match or shortens the candidate; in
  // practice a write costs a few O(log prefixes) lookups.
  std::string_view bound = key;
  size_t change = kNoChange;  // its index in changes_ once it woke a watch
  for (;;) {
    auto it = prefixes_.upper_bound(bound);
    if (it == prefixes_.begin()) break;
    --it;
    const std::string& p = it->first;
    if (bound.compare(0, p.size(), p) != 0) {
      // p < bound and not its prefix, so bound is not a prefix of p
      // either: they differ at `common` < bound.size().
      size_t common = 0;
      while (common < p.size() && p[common] == bound[common]) ++common;
      bound = bound.substr(0, common);
      continue;
    }
    WatchedPrefix& watched = it->second;
    watched.max_revision = std::max(watched.max_revision, revision);
    // The change is the newest revision, so it answers every watch from an
    // earlier one; a watch from a later (future) one keeps waiting.
    auto& ws = watched.waiters;
    if (!ws.empty()) {
      auto end = ws.lower_bound({revision, WaiterId{0}});
      if (ws.begin() != end && change == kNoChange) {
        change = changes_.size();
        changes_.emplace_back(key, revision);
      }
      for (auto w = ws.begin(); w != end; ++w) {
        woken_.emplace_back(w->second, change);
      }
      ws.erase(ws.begin(), end);
      if (ws.empty()) ++idle_prefixes_;
    }
    if (p.empty()) break;
    bound = bound.substr(0, p.size() - 1);
  }
  // An erasure answers no get: they wait for keys to exist.
  if (!written) return;
  if (auto g = gets_by_key_.find(key); g != gets_by_key_.end()) {
    for (WaiterId id : g->second) woken_.emplace_back(id, kNoChange);
    gets_by_key_.erase(g);
  }
}

bool StoreCore::TryAnswerGet(Waiter& w, Ready* ready) {
  // Look from the key it was parked on, wrapping around: keys are often
  // written in request order, so a waiter on many keys costs O(keys) in
  // all rather than per write, and a full turn still checks every key.
  const size_t n = w.keys.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (w.missing + i) % n;
    if (!data_.count(w.keys[k])) {
      w.missing = k;
      return false;
    }
  }
  std::vector<std::string> values;
  values.reserve(n);
  for (const std::string& key : w.keys) {
    values.push_back(data_.find(key)->second.data);
  }
  ready->push_back(
      [done = std::move(w.get_done), values = std::move(values)]() mutable {
        done(std::move(values));
      });
  return true;
}

void StoreCore::Resolve(Ready* ready) {
  // Answer in arrival order (ids grow), as one pass over all waiters did,
  // whichever index woke them; a watch woken twice (by two of its
  // prefixes) is answered by the first, earliest change.
  std::sort(woken_.begin(), woken_.end());
  for (const auto& [id, change] : woken_) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    Waiter& w = it->second;
    if (w.is_watch) {
      WatchResult r;
      r.changed = true;
      r.revision = revision_;
      if (change != kNoChange) r.change = OnlyChange(w, changes_[change]);
      ready->push_back([done = std::move(w.watch_done),
                        r = std::move(r)]() mutable { done(std::move(r)); });
      Unpark(it);
    } else if (TryAnswerGet(w, ready)) {
      Unpark(it);
    } else {
      gets_by_key_[w.keys[w.missing]].insert(id);
    }
  }
  woken_.clear();
  changes_.clear();
  if (idle_prefixes_ > kMaxIdlePrefixes) DropIdlePrefixes();
}

std::optional<WatchChange> StoreCore::OnlyChange(
    const Waiter& w, const std::pair<std::string, int64_t>& change) {
  // It was parked with nothing changed under its prefixes since its
  // revision, and this is the first change that reached it: the only one
  // unless a prefix changed again later in the same request or tick.
  for (const std::string& p : w.prefixes) {
    auto t = prefixes_.find(p);
    if (t == prefixes_.end() || t->second.max_revision > change.second) {
      return std::nullopt;
    }
  }
  WatchChange c;
  c.key = change.first;
  c.revision = change.second;
  if (auto d = data_.find(change.first); d != data_.end()) {
    c.value = d->second.data;
  }
  return c;
}

bool StoreCore::ChangedSince(const std::vector<std::string>& prefixes,
                             int64_t after_revision) {
  // Nothing at all changed since: the usual watch from a fresh listing.
  if (after_revision >= revision_) return false;
  for (const std::string& p : prefixes) {
    if (TrackPrefix(p).max_revision > after_revision) return true;
  }
  return false;
}

StoreCore::WatchedPrefix& StoreCore::TrackPrefix(const std::string& prefix) {
  auto [it, inserted] = prefixes_.try_emplace(prefix);
  if (!inserted) return it->second;
  ++idle_prefixes_;
  // One scan when a prefix is first watched; NoteChange keeps it current
  // from here on. Every change leaves its revision on its key (a later
  // change of the key only raises it), in data_ or as a tombstone, so the
  // scan finds the newest change under the prefix, unless that was a
  // tombstone dropped at or before tombstone_floor_: count the floor as a
  // change, answering a watch from before it at once (it relists) rather
  // than letting it miss a deletion.
  int64_t newest = tombstone_floor_;
  for (auto d = data_.lower_bound(prefix);
       d != data_.end() && absl::StartsWith(d->first, prefix); ++d) {
    newest = std::max(newest, d->second.revision);
  }
  for (auto d = deleted_at_.lower_bound(prefix);
       d != deleted_at_.end() && absl::StartsWith(d->first, prefix); ++d) {
    newest = std::max(newest, d->second);
  }
  it->second.max_revision = newest;
  return it->second;
}

void StoreCore::DropIdlePrefixes() {
  // Prefixes no one watches now stay tracked so that the next watch on
  // them (a client relisting and watching again) needs no scan; past
  // kMaxIdlePrefixes they all go, which costs one scan per prefix watched
  // again, and each sweep follows kMaxIdlePrefixes new idle ones.
  for (auto it = prefixes_.begin(); it != prefixes_.end();) {
    it = it->second.waiters.empty() ? prefixes_.erase(it) : std::next(it);
  }
  idle_prefixes_ = 0;
}

StoreCore::WaiterId StoreCore::Park(Waiter w) {
  const WaiterId id = ++next_waiter_id_;
  waiter_bytes_ += w.bytes;
  if (w.deadline != TimePoint::max()) {
    deadlines_.emplace(w.deadline, id);
  }
  if (w.is_watch) {
    for (const std::string& p : w.prefixes) {
      WatchedPrefix& watched = TrackPrefix(p);
      if (watched.waiters.empty()) --idle_prefixes_;
      watched.waiters.emplace(w.after_revision, id);
    }
  } else {
    gets_by_key_[w.keys[w.missing]].insert(id);
  }
  waiters_.emplace(id, std::move(w));
  return id;
}

uint64_t StoreCore::ParkOrRefuse(Waiter w, Ready* ready) {
  absl::Status refused;
  if (closed_) {
    refused = absl::CancelledError("the store is shutting down");
  } else if (waiters_.size() >= limits_.max_waiters) {
    refused = absl::ResourceExhaustedError(
        absl::StrCat("too many blocked waits: the limit (max_waiters) is ",
                     limits_.max_waiters));
  } else if (waiter_bytes_ + w.bytes > limits_.max_waiter_bytes) {
    refused = absl::ResourceExhaustedError(
        absl::StrCat("parked waits hold ", waiter_bytes_,
                     " bytes; their limit (max_waiter_bytes) is ",
                     limits_.max_waiter_bytes));
  }
  if (refused.ok()) return Park(std::move(w));
  if (w.is_watch) {
    ready->push_back([d = std::move(w.watch_done), refused] { d(refused); });
  } else {
    ready->push_back([d = std::move(w.get_done), refused] { d(refused); });
  }
  return 0;
}

void StoreCore::Cancel(uint64_t ticket) {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(ticket);
    if (it == waiters_.end()) return;
    Waiter w = Unpark(it);
    const absl::Status gone = absl::CancelledError("the caller went away");
    if (w.is_watch) {
      ready.push_back([d = std::move(w.watch_done), gone] { d(gone); });
    } else {
      ready.push_back([d = std::move(w.get_done), gone] { d(gone); });
    }
  }
  for (auto& f : ready) f();
}

StoreCore::Waiter StoreCore::Unpark(std::map<WaiterId, Waiter>::iterator it) {
  const WaiterId id = it->first;
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  waiter_bytes_ -= w.bytes;
  if (w.deadline != TimePoint::max()) {
    deadlines_.erase({w.deadline, id});
  }
  // NoteChange already took a waiter it woke out of these.
  if (w.is_watch) {
    for (const std::string& prefix : w.prefixes) {
      auto p = prefixes_.find(prefix);
      if (p != prefixes_.end() &&
          p->second.waiters.erase({w.after_revision, id}) > 0 &&
          p->second.waiters.empty()) {
        ++idle_prefixes_;
      }
    }
  } else {
    auto g = gets_by_key_.find(w.keys[w.missing]);
    if (g != gets_by_key_.end() && g->second.erase(id) > 0 &&
        g->second.empty()) {
      gets_by_key_.erase(g);
    }
  }
  return w;
}

absl::StatusOr<int64_t> StoreCore::MultiSet(
    const std::vector<std::pair<std::string, std::string>>& kvs,
    absl::Duration ttl) {
  if (kvs.size() > limits_.max_keys_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        kvs.size(),
        " keys in one request; the limit (max_keys_per_request) is ",
        limits_.max_keys_per_request));
  }
  const TimePoint exp =
      ttl > absl::ZeroDuration() ? DeadlineAfter(ttl) : TimePoint::max();
  Ready ready;
  int64_t rev;
  {
    absl::MutexLock lock(&mu_);
    // The whole request must fit: what it adds, less what it replaces.
    size_t added = 0;
    size_t freed = 0;
    for (const auto& [key, value] : kvs) {
      if (auto s = CheckKey(key); !s.ok()) return s;
      auto it = data_.find(key);
      if (it == data_.end()) {
        added += key.size() + kKeyOverhead;
      } else {
        freed += it->second.data.size();
      }
      added += value.size();
      if (auto s =
              CheckValue(key, it == data_.end() ? 0 : it->second.data.size(),
                         value.size());
          !s.ok()) {
        return s;
      }
    }
    if (auto s = CheckRoom(added, freed); !s.ok()) return s;
    bool changed = false;
    for (const auto& [key, value] : kvs) {
      auto it = data_.find(key);
      // Renewing a lease with the same value is a keep-alive, not a change:
      // watchers are not woken, so heartbeats cost O(1) each.
      if (it != data_.end() && exp != TimePoint::max() &&
          it->second.expires != TimePoint::max() && it->second.data == value) {
        SetExpiry(it, exp);
        it->second.written = clock_->Now();
        continue;
      }
      Write(key, value, exp);
      changed = true;
    }
    if (!changed) return revision_;
    rev = revision_;
    Resolve(&ready);
  }
  for (auto& f : ready) f();
  return rev;
}

uint64_t StoreCore::MultiGet(const std::vector<std::string>& keys,
                             absl::Duration timeout, GetCallback done) {
  if (auto s = CheckKeys(keys); !s.ok()) {
    done(s);
    return 0;
  }
  Ready ready;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    Waiter w;
    w.keys = keys;
    w.get_done = std::move(done);
    if (!TryAnswerGet(w, &ready)) {
      if (timeout <= absl::ZeroDuration()) {
        std::string missing;
        for (const auto& k : keys) {
          if (!data_.count(k)) missing = k;
        }
        ready.push_back([d = std::move(w.get_done), missing] {
          d(absl::NotFoundError(absl::StrCat("key '", missing, "' not set")));
        });
      } else {
        w.deadline = WaitDeadline(timeout);
        w.bytes = WaiterBytes(w.keys, "", limits_.call_bytes);
        ticket = ParkOrRefuse(std::move(w), &ready);
      }
    }
  }
  for (auto& f : ready) f();
  return ticket;
}

absl::StatusOr<int64_t> StoreCore::Add(const std::string& key, int64_t delta) {
  return AddThenRecord(key, delta, "", "");
}

absl::StatusOr<int64_t> StoreCore::AddThenRecord(
    const std::string& key, int64_t delta, const std::string& record_prefix,
    const std::string& record) {
  if (auto s = CheckKey(key); !s.ok()) return s;
  const bool recording = !record_prefix.empty();
  Ready ready;
  int64_t result = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    int64_t current = 0;
    if (it != data_.end() && !absl::SimpleAtoi(it->second.data, &current)) {
      return absl::FailedPreconditionError(
          absl::StrCat("key '", key, "' does not hold an integer"));
    }
    // A client's delta is any int64; wrapping would be undefined behaviour
    // and a counter that silently went negative.
    if (__builtin_add_overflow(current, delta, &result)) {
      return absl::OutOfRangeError(absl::StrCat("adding ", delta, " to key '",
                                                key, "' (", current,
                                                ") overflows 64 bits"));
    }
    std::string text = absl::StrCat(result);
    std::string record_key;
    if (!recording) {
      if (auto s = CheckValue(
              key, it == data_.end() ? 0 : it->second.data.size(), text.size());
          !s.ok()) {
        return s;
      }
    } else {
      record_key = absl::StrCat(record_prefix, result);
      if (record_key == key) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the record of an add to '", key, "' would replace the counter"));
      }
      if (auto s = CheckKey(record_key); !s.ok()) return s;
      // Both sizes first, then room for both at once: a refusal changes
      // nothing (CheckRoom may drop tombstones to make room).
      if (auto s = CheckValueSize(text.size()); !s.ok()) return s;
      if (auto s = CheckValueSize(record.size()); !s.ok()) return s;
      size_t added = text.size() + record.size();
      size_t freed = 0;
      if (it == data_.end()) {
        added += key.size() + kKeyOverhead;
      } else {
        freed += it->second.data.size();
      }
      if (auto r = data_.find(record_key); r == data_.end()) {
        added += record_key.size() + kKeyOverhead;
      } else {
        freed += r->second.data.size();
      }
      if (auto s = CheckRoom(added, freed); !s.ok()) return s;
    }
    Write(key, std::move(text), TimePoint::max());
    if (recording) Write(record_key, record, TimePoint::max());
    Resolve(&ready);
  }
  for (auto& f : ready) f();
  return result;
}

absl::StatusOr<CompareSetResult> StoreCore::CompareSet(
    const std::string& key, const std::string& expected,
    const std::string& desired) {
  if (auto s = CheckKey(key); !s.ok()) return s;
  Ready ready;
  CompareSetResult result;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    const bool matches =
        it == data_.end() ? expected.empty() : it->second.data == expected;
    if (!matches) {
      // TCPStore: a missing key with a non-empty expectation returns the
      // expectation itself; an existing one returns its value.
      result.value = it == data_.end() ? expected : it->second.data;
      return result;
    }
    if (auto s = CheckValue(key, it == data_.end() ? 0 : it->second.data.size(),
                            desired.size());
        !s.ok()) {
      return s;
    }
    Write(key, desired, TimePoint::max());
    result.value = desired;
    result.swapped = true;
    Resolve(&ready);
  }
  for (auto& f : ready) f();
  return result;
}

absl::StatusOr<int64_t> StoreCore::Append(const std::string& key,
                                          const std::string& value) {
  if (auto s = CheckKey(key); !s.ok()) return s;
  Ready ready;
  int64_t size = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    const size_t old = it == data_.end() ? 0 : it->second.data.size();
    // Checked before the copy: an append to a full value must not copy it.
    if (auto s = CheckValue(key, old, old + value.size()); !s.ok()) return s;
    std::string data = it == data_.end() ? "" : it->second.data;
    data += value;
    size = static_cast<int64_t>(data.size());
    Write(key, std::move(data),
          it == data_.end() ? TimePoint::max() : it->second.expires);
    Resolve(&ready);
  }
  for (auto& f : ready) f();
  return size;
}

absl::StatusOr<bool> StoreCore::Check(const std::vector<std::string>& keys) {
  if (auto s = CheckKeys(keys); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const auto& k : keys) {
    if (!data_.count(k)) return false;
  }
  return true;
}

absl::StatusOr<int64_t> StoreCore::Delete(
    const std::vector<std::string>& keys) {
  if (auto s = CheckKeys(keys); !s.ok()) return s;
  Ready ready;
  int64_t deleted = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& k : keys) {
      auto it = data_.find(k);
      if (it == data_.end()) continue;
      Erase(it);
      ++deleted;
    }
    if (deleted > 0) Resolve(&ready);
  }
  for (auto& f : ready) f();
  return deleted;
}

int64_t StoreCore::NumKeys() {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(data_.size());
}

StoreStats StoreCore::Stats() {
  absl::MutexLock lock(&mu_);
  StoreStats stats;
  stats.keys = static_cast<int64_t>(data_.size());
  stats.bytes = static_cast<int64_t>(total_bytes_ + waiter_bytes_);
  stats.parked_waits = static_cast<int64_t>(waiters_.size());
  stats.lease_expiries = lease_expiries_;
  return stats;
}

absl::StatusOr<StoreListing> StoreCore::List(const std::string& prefix,
                                             const std::string& start_after,
                                             size_t limit) {
  if (auto s = CheckKey(prefix); !s.ok()) return s;
  if (auto s = CheckKey(start_after); !s.ok()) return s;
  if (limit == 0 || limit > limits_.max_list_entries) {
    limit = limits_.max_list_entries;
  }
  absl::MutexLock lock(&mu_);
  StoreListing out;
  out.revision = revision_;
  const TimePoint now = clock_->Now();
  auto it = start_after.empty() || start_after < prefix
                ? data_.lower_bound(prefix)
                : data_.upper_bound(start_after);
  size_t bytes = 0;
  for (; it != data_.end() && absl::StartsWith(it->first, prefix); ++it) {
    const size_t size = it->first.size() + it->second.data.size();
    if (out.entries.size() == limit ||
        (!out.entries.empty() && bytes + size > limits_.max_list_bytes)) {
      out.more = true;
      break;
    }
    bytes += size;
    StoreEntry e;
    e.key = it->first;
    e.value = it->second.data;
    e.revision = it->second.revision;
    e.age = Since(it->second.written);
    e.ttl_left = it->second.expires == TimePoint::max()
                     ? absl::ZeroDuration()
                     : absl::FromChrono(it->second.expires - now);
    out.entries.push_back(std::move(e));
  }
  return out;
}

uint64_t StoreCore::Watch(const std::string& prefix, int64_t after_revision,
                          absl::Duration timeout, WatchCallback done) {
  return WatchAny({prefix}, after_revision, timeout,
                  [done = std::move(done)](absl::StatusOr<WatchResult> r) {
                    if (!r.ok()) return done(r.status());
                    done(std::make_pair(r->changed, r->revision));
                  });
}

uint64_t StoreCore::WatchAny(const std::vector<std::string>& prefixes,
                             int64_t after_revision, absl::Duration timeout,
                             WatchAnyCallback done) {
  if (prefixes.empty()) {
    done(absl::InvalidArgumentError("a watch needs at least one prefix"));
    return 0;
  }
  if (prefixes.size() > limits_.max_watch_prefixes) {
    done(absl::InvalidArgumentError(
        absl::StrCat("watch of ", prefixes.size(), " prefixes: at most ",
                     limits_.max_watch_prefixes, " (max_watch_prefixes)")));
    return 0;
  }
  if (auto s = CheckKeys(prefixes); !s.ok()) {
    done(s);
    return 0;
  }
  Ready ready;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    Waiter w;
    w.is_watch = true;
    w.prefixes = prefixes;
    w.after_revision = after_revision;
    w.watch_done = std::move(done);
    if (ChangedSince(prefixes, after_revision)) {
      ready.push_back([d = std::move(w.watch_done), rev = revision_] {
        d(WatchResult{true, rev, std::nullopt});
      });
    } else if (timeout <= absl::ZeroDuration()) {
      ready.push_back([d = std::move(w.watch_done), rev = revision_] {
        d(WatchResult{false, rev, std::nullopt});
      });
    } else {
      w.deadline = WaitDeadline(timeout);
      // The first prefix counts as a single watch's always did.
      w.bytes = WaiterBytes(
          std::vector<std::string>(prefixes.begin() + 1, prefixes.end()),
          prefixes[0], limits_.call_bytes);
      ticket = ParkOrRefuse(std::move(w), &ready);
    }
    if (idle_prefixes_ > kMaxIdlePrefixes) DropIdlePrefixes();
  }
  for (auto& f : ready) f();
  return ticket;
}

void StoreCore::CancelAll() {
  std::map<WaiterId, Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    waiter_bytes_ = 0;
    waiters.swap(waiters_);
    deadlines_.clear();
    gets_by_key_.clear();
    for (auto& [prefix, watched] : prefixes_) {
      if (watched.waiters.empty()) continue;
      watched.waiters.clear();
      ++idle_prefixes_;
    }
  }
  for (auto& [id, w] : waiters) {
    if (w.is_watch) {
      w.watch_done(absl::CancelledError("the store is shutting down"));
    } else {
      w.get_done(absl::CancelledError("the store is shutting down"));
    }
  }
}

void StoreCore::TimerLoop() {
  // A 10 ms tick bounds lease and deadline precision; a tick pops only the
  // leases and waiters that are due, in deadline order.
  for (;;) {
    Ready ready;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                               absl::Milliseconds(10))) {
        return;
      }
      const TimePoint now = clock_->Now();
      bool expired = false;
      while (!leases_.empty() && leases_.begin()->first <= now) {
        Erase(data_.find(*leases_.begin()->second));
        ++lease_expiries_;
        expired = true;
      }
      // Before deadlines: a waiter the expiry answers is not timed out.
      if (expired) Resolve(&ready);
      while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        Waiter w = Unpark(waiters_.find(deadlines_.begin()->second));
        if (w.is_watch) {
          ready.push_back([d = std::move(w.watch_done), rev = revision_] {
            d(WatchResult{false, rev, std::nullopt});
          });
        } else {
          std::string keys;
          for (const auto& k : w.keys) absl::StrAppend(&keys, " ", k);
          ready.push_back([d = std::move(w.get_done), keys] {
            d(absl::DeadlineExceededError(
                absl::StrCat("timed out waiting for keys:", keys)));
          });
        }
      }
    }
    for (auto& f : ready) f();
  }
}

template <typename T>
absl::StatusOr<T> LocalStore::Block(
    const std::function<uint64_t(std::function<void(absl::StatusOr<T>)>)>&
        start) {
  // Shared with the core's callback, which may run after Close answered
  // (and after this view is gone).
  struct Answer {
    absl::Mutex mu;
    bool given ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<T> result ABSL_GUARDED_BY(mu);
    absl::Notification done;
    // The core's ticket for the parked wait, and whether Close came before
    // `start` returned it.
    uint64_t ticket ABSL_GUARDED_BY(mu) = 0;
    bool closed ABSL_GUARDED_BY(mu) = false;
  };
  auto answer = std::make_shared<Answer>();
  auto give = [answer](absl::StatusOr<T> r) {
    absl::MutexLock lock(&answer->mu);
    if (answer->given) return;
    answer->given = true;
    answer->result = std::move(r);
    answer->done.Notify();
  };
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError("the store view is closed");
    id = next_call_++;
    // Answering the caller is not enough: the core's waiter would stay
    // parked (its memory and a waiter's place) until its timeout.
    cancels_[id] = [give, answer, core = core_] {
      give(absl::CancelledError("the store view was closed"));
      uint64_t ticket;
      {
        absl::MutexLock lock(&answer->mu);
        answer->closed = true;
        ticket = answer->ticket;
      }
      if (ticket != 0) core->Cancel(ticket);
    };
  }
  const uint64_t ticket = start(give);
  bool closed;
  {
    absl::MutexLock lock(&answer->mu);
    answer->ticket = ticket;
    closed = answer->closed;
  }
  if (closed && ticket != 0) core_->Cancel(ticket);
  answer->done.WaitForNotification();
  {
    absl::MutexLock lock(&mu_);
    cancels_.erase(id);
  }
  absl::MutexLock lock(&answer->mu);
  return std::move(answer->result);
}

absl::StatusOr<std::vector<std::string>> LocalStore::MultiGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  return Block<std::vector<std::string>>([&](auto give) {
    return core_->MultiGet(keys, timeout, std::move(give));
  });
}

absl::StatusOr<WatchResult> LocalStore::WatchAny(
    const std::vector<std::string>& prefixes, int64_t after_revision,
    absl::Duration timeout) {
  return Block<WatchResult>([&](auto give) {
    return core_->WatchAny(prefixes, after_revision, timeout, std::move(give));
  });
}

void LocalStore::Close() {
  std::vector<std::function<void()>> cancels;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [id, cancel] : cancels_) cancels.push_back(cancel);
  }
  for (auto& cancel : cancels) cancel();
}

}  // namespace distjob
