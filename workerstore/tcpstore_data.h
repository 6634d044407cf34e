// The workers' TCPStore's contents: its keys' values and its queues, and
// the bytes they count against max_total_bytes (each entry its key, its
// value and kTcpStoreKeyBytes). Apart from the server's loop so that what
// the store holds, and what that costs, can be read and tested without a
// socket.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_DATA_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_DATA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace distjob {

// A value this long or longer is held in a shared buffer that answers
// refer to (TcpStoreValue::shared); a shorter one in place, and copied
// into each answer. Referring costs a queue entry, a reference count, an
// iovec and a pointer more to follow a value whatever its size: for
// gloo's ~100-byte addresses that was more CPU than the copy (16.7M
// values of a 4,096-rank all-gather: 5.2-6.0 ns a byte answered against
// 4.4-4.8 copying, 2 runs each, 2 cores under load), while a large
// value's copy costs its length in CPU and, for a slow reader, in memory.
inline constexpr size_t kShareValuesFrom = 4096;

// A key's value, held in the form an answer sends it (its length as a
// u64 in host order, as TCPStore's, then its bytes). From
// kShareValuesFrom bytes on it is shared: a get or multi_get answer refers
// to these bytes rather than copying them into each connection's output,
// and the reference keeps them alive, unchanged, when the key is
// overwritten or deleted before the answer is sent.
class TcpStoreValue {
 public:
  explicit TcpStoreValue(absl::string_view bytes);
  absl::string_view wire() const {
    return shared_ ? absl::string_view(*shared_) : absl::string_view(own_);
  }
  absl::string_view bytes() const { return wire().substr(sizeof(uint64_t)); }
  size_t size() const { return wire().size() - sizeof(uint64_t); }
  // The buffer answers refer to; null for a value copied into them.
  const std::shared_ptr<const std::string>& shared() const { return shared_; }

 private:
  std::string own_;
  std::shared_ptr<const std::string> shared_;
};

// The server's loop thread alone calls its methods; keys() and bytes() may
// be read on any thread (TcpStoreServer::Stats).
class TcpStoreData {
 public:
  using Values = absl::flat_hash_map<std::string, TcpStoreValue>;

  explicit TcpStoreData(size_t max_total_bytes)
      : max_total_bytes_(max_total_bytes) {}
  TcpStoreData(const TcpStoreData&) = delete;
  TcpStoreData& operator=(const TcpStoreData&) = delete;

  // The value of `key`, or null (a queue is not a value).
  const TcpStoreValue* Find(absl::string_view key) const;
  // Whether `key` holds a value or a queue item: what a wait waits for.
  bool Exists(absl::string_view key) const;
  // Whether `key` may hold a value of `size` bytes within max_total_bytes.
  bool Fits(absl::string_view key, size_t size) const;
  // Sets `key`'s value; the caller asked Fits first.
  void Put(absl::string_view key, absl::string_view value);
  // Removes `key`'s value; false when it had none.
  bool Erase(absl::string_view key);

  // Appends `item` to `key`'s queue; false, and nothing added, when that
  // would pass max_total_bytes.
  bool Push(absl::string_view key, absl::string_view item);
  // Removes and returns the first item of `key`'s queue; none when empty.
  std::optional<std::string> Pop(absl::string_view key);
  size_t QueueLength(absl::string_view key) const;

  // Every key with a value (list_keys, get_num_keys).
  const Values& values() const { return values_; }
  // Drops every value and queue.
  void Clear();

  size_t total_bytes() const { return total_bytes_; }
  size_t max_total_bytes() const { return max_total_bytes_; }
  int64_t keys() const { return keys_.load(std::memory_order_relaxed); }
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  static size_t EntryBytes(size_t key, size_t value);
  // Publishes the counts Stats reads.
  void Published();

  const size_t max_total_bytes_;
  Values values_;
  absl::flat_hash_map<std::string, std::deque<std::string>> queues_;
  size_t total_bytes_ = 0;
  std::atomic<int64_t> keys_{0}, bytes_{0};
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_DATA_H_
