// The state of the rendezvous store and its operations, independent of the
// transport. Blocking operations (get/wait, watch) take a callback instead
// of a thread: they are parked as waiters and answered by whichever write,
// expiry or deadline resolves them, so thousands of blocked clients cost a
// few hundred bytes each. One timer thread expires leases and waiters, on
// the monotonic clock of this process.
#ifndef DISTJOB_RENDEZVOUS_STORE_CORE_H_
#define DISTJOB_RENDEZVOUS_STORE_CORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/store_interface.h"

namespace distjob {

struct StoreLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  size_t max_keys_per_request = 4096;
  size_t max_total_bytes = size_t{256} << 20;
  size_t max_waiters = 100000;
};

class StoreCore {
 public:
  using Clock = std::chrono::steady_clock;
  using GetCallback =
      std::function<void(absl::StatusOr<std::vector<std::string>>)>;
  using WatchCallback =
      std::function<void(absl::StatusOr<std::pair<bool, int64_t>>)>;

  explicit StoreCore(StoreLimits limits = {});
  ~StoreCore();
  StoreCore(const StoreCore&) = delete;
  StoreCore& operator=(const StoreCore&) = delete;

  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl);
  // `done` runs exactly once, possibly on this thread before returning.
  void MultiGet(const std::vector<std::string>& keys, absl::Duration timeout,
                GetCallback done);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  absl::StatusOr<CompareSetResult> CompareSet(const std::string& key,
                                              const std::string& expected,
                                              const std::string& desired);
  absl::StatusOr<int64_t> Append(const std::string& key,
                                 const std::string& value);
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys);
  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& keys);
  int64_t NumKeys();
  StoreListing List(const std::string& prefix);
  void Watch(const std::string& prefix, int64_t after_revision,
             absl::Duration timeout, WatchCallback done);

  // Answers every parked waiter, and every later blocking call, with
  // Cancelled (server shutdown).
  void CancelAll();

 private:
  struct Value {
    std::string data;
    int64_t revision = 0;
    Clock::time_point written;
    Clock::time_point expires = Clock::time_point::max();
  };
  struct Waiter {
    bool is_watch = false;
    std::vector<std::string> keys;  // get
    std::string prefix;             // watch
    int64_t after_revision = 0;
    Clock::time_point deadline;
    GetCallback get_done;
    WatchCallback watch_done;
  };
  using Ready = std::vector<std::function<void()>>;

  absl::Status CheckKey(const std::string& key) const;
  absl::Status CheckValue(size_t old_size, size_t new_size) const;
  void Write(const std::string& key, std::string data, Clock::time_point exp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Erase(std::map<std::string, Value>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves waiters that `changed_key` (or the clock) resolves into `ready`.
  void Resolve(Ready* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TryAnswer(Waiter& w, Ready* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  const StoreLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, Value> data_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> deleted_at_ ABSL_GUARDED_BY(mu_);
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

// StoreInterface over a StoreCore in this process: the fake for unit tests
// and the host's own view of the store it serves (no loopback RPC).
class LocalStore : public StoreInterface {
 public:
  explicit LocalStore(StoreCore* core) : core_(core) {}
  absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override {
    return core_->MultiSet(kvs, ttl);
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    return core_->Add(key, delta);
  }
  absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override {
    return core_->CompareSet(key, expected, desired);
  }
  absl::StatusOr<int64_t> Append(const std::string& key,
                                 const std::string& value) override {
    return core_->Append(key, value);
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    return core_->Check(keys);
  }
  absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override {
    return core_->Delete(keys);
  }
  absl::StatusOr<int64_t> NumKeys() override { return core_->NumKeys(); }
  absl::StatusOr<StoreListing> List(const std::string& prefix) override {
    return core_->List(prefix);
  }
  absl::StatusOr<std::pair<bool, int64_t>> Watch(
      const std::string& prefix, int64_t after_revision,
      absl::Duration timeout) override;

 private:
  StoreCore* core_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_CORE_H_
