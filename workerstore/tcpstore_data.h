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
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace distjob {

// The server's loop thread alone calls its methods; keys() and bytes() may
// be read on any thread (TcpStoreServer::Stats).
class TcpStoreData {
 public:
  using Values = absl::flat_hash_map<std::string, std::string>;

  explicit TcpStoreData(size_t max_total_bytes)
      : max_total_bytes_(max_total_bytes) {}
  TcpStoreData(const TcpStoreData&) = delete;
  TcpStoreData& operator=(const TcpStoreData&) = delete;

  // The value of `key`, or null (a queue is not a value).
  const std::string* Find(absl::string_view key) const;
  // Whether `key` holds a value or a queue item: what a wait waits for.
  bool Exists(absl::string_view key) const;
  // Whether `key` may hold a value of `size` bytes within max_total_bytes.
  bool Fits(absl::string_view key, size_t size) const;
  // Sets `key`'s value; the caller asked Fits first.
  void Put(absl::string_view key, std::string value);
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
