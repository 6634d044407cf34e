#include "rendezvous/store_core.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace distjob {
namespace {

StoreCore::Clock::time_point DeadlineAfter(absl::Duration d) {
  if (d == absl::InfiniteDuration() || d > absl::Hours(24 * 365)) {
    return StoreCore::Clock::time_point::max();
  }
  return StoreCore::Clock::now() + absl::ToChronoNanoseconds(d);
}

absl::Duration Since(StoreCore::Clock::time_point t) {
  return absl::FromChrono(StoreCore::Clock::now() - t);
}

}  // namespace

StoreCore::StoreCore(StoreLimits limits) : limits_(limits) {
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
    return absl::InvalidArgumentError(
        absl::StrCat("key of ", key.size(), " bytes is over the limit of ",
                     limits_.max_key_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreCore::CheckValue(size_t old_size, size_t new_size) const {
  if (new_size > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of ", new_size, " bytes is over the limit of ",
                     limits_.max_value_bytes));
  }
  // Called under mu_ by every writer.
  if (total_bytes_ - old_size + new_size > limits_.max_total_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the store holds ", total_bytes_, " bytes; its limit is ",
                     limits_.max_total_bytes));
  }
  return absl::OkStatus();
}

void StoreCore::Write(const std::string& key, std::string data,
                      Clock::time_point exp) {
  Value& v = data_[key];
  total_bytes_ = total_bytes_ - v.data.size() + data.size();
  if (v.revision == 0) total_bytes_ += key.size();
  v.data = std::move(data);
  v.revision = ++revision_;
  v.written = Clock::now();
  v.expires = exp;
  deleted_at_.erase(key);
}

void StoreCore::Erase(std::map<std::string, Value>::iterator it) {
  total_bytes_ -= it->first.size() + it->second.data.size();
  deleted_at_[it->first] = ++revision_;
  data_.erase(it);
}

bool StoreCore::TryAnswer(Waiter& w, Ready* ready) {
  if (w.is_watch) {
    bool changed = false;
    for (auto it = data_.lower_bound(w.prefix);
         !changed && it != data_.end() && absl::StartsWith(it->first, w.prefix);
         ++it) {
      changed = it->second.revision > w.after_revision;
    }
    for (auto it = deleted_at_.lower_bound(w.prefix);
         !changed && it != deleted_at_.end() &&
         absl::StartsWith(it->first, w.prefix);
         ++it) {
      changed = it->second > w.after_revision;
    }
    if (!changed) return false;
    ready->push_back([done = std::move(w.watch_done), rev = revision_] {
      done(std::make_pair(true, rev));
    });
    return true;
  }
  std::vector<std::string> values;
  for (const std::string& key : w.keys) {
    auto it = data_.find(key);
    if (it == data_.end()) return false;
    values.push_back(it->second.data);
  }
  ready->push_back(
      [done = std::move(w.get_done), values = std::move(values)]() mutable {
        done(std::move(values));
      });
  return true;
}

void StoreCore::Resolve(Ready* ready) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (TryAnswer(*it, ready)) {
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<int64_t> StoreCore::MultiSet(
    const std::vector<std::pair<std::string, std::string>>& kvs,
    absl::Duration ttl) {
  if (kvs.size() > limits_.max_keys_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat(kvs.size(), " keys in one request; the limit is ",
                     limits_.max_keys_per_request));
  }
  const Clock::time_point exp = ttl > absl::ZeroDuration()
                                    ? DeadlineAfter(ttl)
                                    : Clock::time_point::max();
  Ready ready;
  int64_t rev;
  {
    absl::MutexLock lock(&mu_);
    size_t added = 0;
    for (const auto& [key, value] : kvs) {
      if (auto s = CheckKey(key); !s.ok()) return s;
      auto it = data_.find(key);
      const size_t old = it == data_.end() ? 0 : it->second.data.size();
      added += value.size() + key.size();
      if (auto s = CheckValue(old, value.size()); !s.ok()) return s;
    }
    if (total_bytes_ + added > limits_.max_total_bytes) {
      return absl::ResourceExhaustedError("the store is full");
    }
    bool changed = false;
    for (const auto& [key, value] : kvs) {
      auto it = data_.find(key);
      // Renewing a lease with the same value is a keep-alive, not a change:
      // watchers are not woken, so heartbeats cost O(1) each.
      if (it != data_.end() && exp != Clock::time_point::max() &&
          it->second.expires != Clock::time_point::max() &&
          it->second.data == value) {
        it->second.expires = exp;
        it->second.written = Clock::now();
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

void StoreCore::MultiGet(const std::vector<std::string>& keys,
                         absl::Duration timeout, GetCallback done) {
  if (keys.size() > limits_.max_keys_per_request) {
    done(absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " keys in one request; the limit is ",
                     limits_.max_keys_per_request)));
    return;
  }
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    Waiter w;
    w.keys = keys;
    w.get_done = std::move(done);
    if (!TryAnswer(w, &ready)) {
      if (timeout <= absl::ZeroDuration()) {
        std::string missing;
        for (const auto& k : keys) {
          if (!data_.count(k)) missing = k;
        }
        ready.push_back([d = std::move(w.get_done), missing] {
          d(absl::NotFoundError(absl::StrCat("key '", missing, "' not set")));
        });
      } else if (closed_) {
        ready.push_back([d = std::move(w.get_done)] {
          d(absl::CancelledError("the store is shutting down"));
        });
      } else if (waiters_.size() >= limits_.max_waiters) {
        ready.push_back([d = std::move(w.get_done)] {
          d(absl::ResourceExhaustedError("too many blocked waits"));
        });
      } else {
        w.deadline = DeadlineAfter(timeout);
        waiters_.push_back(std::move(w));
      }
    }
  }
  for (auto& f : ready) f();
}

absl::StatusOr<int64_t> StoreCore::Add(const std::string& key, int64_t delta) {
  if (auto s = CheckKey(key); !s.ok()) return s;
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
    result = current + delta;
    std::string text = absl::StrCat(result);
    if (auto s = CheckValue(it == data_.end() ? 0 : it->second.data.size(),
                            text.size());
        !s.ok()) {
      return s;
    }
    Write(key, std::move(text), Clock::time_point::max());
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
    if (auto s = CheckValue(it == data_.end() ? 0 : it->second.data.size(),
                            desired.size());
        !s.ok()) {
      return s;
    }
    Write(key, desired, Clock::time_point::max());
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
    std::string data = it == data_.end() ? "" : it->second.data;
    if (auto s = CheckValue(data.size(), data.size() + value.size()); !s.ok()) {
      return s;
    }
    data += value;
    size = static_cast<int64_t>(data.size());
    Write(key, std::move(data),
          it == data_.end() ? Clock::time_point::max() : it->second.expires);
    Resolve(&ready);
  }
  for (auto& f : ready) f();
  return size;
}

absl::StatusOr<bool> StoreCore::Check(const std::vector<std::string>& keys) {
  absl::MutexLock lock(&mu_);
  for (const auto& k : keys) {
    if (!data_.count(k)) return false;
  }
  return true;
}

absl::StatusOr<int64_t> StoreCore::Delete(
    const std::vector<std::string>& keys) {
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

StoreListing StoreCore::List(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  StoreListing out;
  out.revision = revision_;
  const Clock::time_point now = Clock::now();
  for (auto it = data_.lower_bound(prefix);
       it != data_.end() && absl::StartsWith(it->first, prefix); ++it) {
    StoreEntry e;
    e.key = it->first;
    e.value = it->second.data;
    e.revision = it->second.revision;
    e.age = Since(it->second.written);
    e.ttl_left = it->second.expires == Clock::time_point::max()
                     ? absl::ZeroDuration()
                     : absl::FromChrono(it->second.expires - now);
    out.entries.push_back(std::move(e));
  }
  return out;
}

void StoreCore::Watch(const std::string& prefix, int64_t after_revision,
                      absl::Duration timeout, WatchCallback done) {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    Waiter w;
    w.is_watch = true;
    w.prefix = prefix;
    w.after_revision = after_revision;
    w.watch_done = std::move(done);
    if (!TryAnswer(w, &ready)) {
      if (timeout <= absl::ZeroDuration()) {
        ready.push_back([d = std::move(w.watch_done), rev = revision_] {
          d(std::make_pair(false, rev));
        });
      } else if (closed_) {
        ready.push_back([d = std::move(w.watch_done)] {
          d(absl::CancelledError("the store is shutting down"));
        });
      } else if (waiters_.size() >= limits_.max_waiters) {
        ready.push_back([d = std::move(w.watch_done)] {
          d(absl::ResourceExhaustedError("too many blocked watches"));
        });
      } else {
        w.deadline = DeadlineAfter(timeout);
        waiters_.push_back(std::move(w));
      }
    }
  }
  for (auto& f : ready) f();
}

void StoreCore::CancelAll() {
  std::list<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    waiters.swap(waiters_);
  }
  for (Waiter& w : waiters) {
    if (w.is_watch) {
      w.watch_done(absl::CancelledError("the store is shutting down"));
    } else {
      w.get_done(absl::CancelledError("the store is shutting down"));
    }
  }
}

void StoreCore::TimerLoop() {
  // A 10 ms tick bounds lease and deadline precision; the work per tick is
  // a scan of leases and parked waiters, cheap next to the RPCs.
  for (;;) {
    Ready ready;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                               absl::Milliseconds(10))) {
        return;
      }
      const Clock::time_point now = Clock::now();
      bool expired = false;
      for (auto it = data_.begin(); it != data_.end();) {
        if (it->second.expires <= now) {
          auto next = std::next(it);
          Erase(it);
          it = next;
          expired = true;
        } else {
          ++it;
        }
      }
      if (expired) Resolve(&ready);
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->deadline > now) {
          ++it;
          continue;
        }
        if (it->is_watch) {
          ready.push_back([d = std::move(it->watch_done), rev = revision_] {
            d(std::make_pair(false, rev));
          });
        } else {
          std::string keys;
          for (const auto& k : it->keys) absl::StrAppend(&keys, " ", k);
          ready.push_back([d = std::move(it->get_done), keys] {
            d(absl::DeadlineExceededError(
                absl::StrCat("timed out waiting for keys:", keys)));
          });
        }
        it = waiters_.erase(it);
      }
    }
    for (auto& f : ready) f();
  }
}

absl::StatusOr<std::vector<std::string>> LocalStore::MultiGet(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  absl::Notification done;
  absl::StatusOr<std::vector<std::string>> result;
  core_->MultiGet(keys, timeout, [&](auto r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

absl::StatusOr<std::pair<bool, int64_t>> LocalStore::Watch(
    const std::string& prefix, int64_t after_revision, absl::Duration timeout) {
  absl::Notification done;
  absl::StatusOr<std::pair<bool, int64_t>> result;
  core_->Watch(prefix, after_revision, timeout, [&](auto r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace distjob
