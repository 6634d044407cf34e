#include "workerstore/tcpstore_data.h"

#include <utility>

#include "workerstore/tcpstore_limits.h"
#include "workerstore/tcpstore_protocol.h"

namespace distjob {

TcpStoreValue::TcpStoreValue(absl::string_view bytes) {
  if (bytes.size() < kShareValuesFrom) {
    own_.reserve(sizeof(uint64_t) + bytes.size());
    tcpstore::AppendBytes(&own_, bytes);
    return;
  }
  auto wire = std::make_shared<std::string>();
  wire->reserve(sizeof(uint64_t) + bytes.size());
  tcpstore::AppendBytes(wire.get(), bytes);
  shared_ = std::move(wire);
}

size_t TcpStoreData::EntryBytes(size_t key, size_t value) {
  return key + value + kTcpStoreKeyBytes;
}

void TcpStoreData::Published() {
  keys_.store(static_cast<int64_t>(values_.size()), std::memory_order_relaxed);
  bytes_.store(static_cast<int64_t>(total_bytes_), std::memory_order_relaxed);
}

const TcpStoreValue* TcpStoreData::Find(absl::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

bool TcpStoreData::Exists(absl::string_view key) const {
  if (values_.find(key) != values_.end()) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

bool TcpStoreData::Fits(absl::string_view key, size_t size) const {
  auto it = values_.find(key);
  const size_t after = it == values_.end()
                           ? total_bytes_ + EntryBytes(key.size(), size)
                           : total_bytes_ - it->second.size() + size;
  return after <= max_total_bytes_;
}

void TcpStoreData::Put(absl::string_view key, absl::string_view value) {
  auto it = values_.find(key);
  if (it == values_.end()) {
    total_bytes_ += EntryBytes(key.size(), value.size());
    values_.emplace(std::string(key), TcpStoreValue(value));
  } else {
    total_bytes_ += value.size();
    total_bytes_ -= it->second.size();
    // A new buffer: answers still queued keep the old one.
    it->second = TcpStoreValue(value);
  }
  Published();
}

bool TcpStoreData::Erase(absl::string_view key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  total_bytes_ -= EntryBytes(it->first.size(), it->second.size());
  values_.erase(it);
  Published();
  return true;
}

bool TcpStoreData::Push(absl::string_view key, absl::string_view item) {
  const size_t add = EntryBytes(key.size(), item.size());
  if (total_bytes_ + add > max_total_bytes_) return false;
  total_bytes_ += add;
  auto it = queues_.find(key);
  if (it == queues_.end()) {
    it = queues_.emplace(std::string(key), std::deque<std::string>()).first;
  }
  it->second.emplace_back(item);
  Published();
  return true;
}

std::optional<std::string> TcpStoreData::Pop(absl::string_view key) {
  auto it = queues_.find(key);
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  std::string item = std::move(it->second.front());
  total_bytes_ -= EntryBytes(key.size(), item.size());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  Published();
  return item;
}

size_t TcpStoreData::QueueLength(absl::string_view key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.size();
}

void TcpStoreData::Clear() {
  values_.clear();
  queues_.clear();
  total_bytes_ = 0;
  Published();
}

}  // namespace distjob
