#include "workerstore/tcpstore_waits.h"

#include <utility>

#include "workerstore/tcpstore_limits.h"

namespace distjob {

size_t TcpStoreWaits::Bytes(const std::vector<std::string>& keys) {
  size_t bytes = kTcpStoreWaitBytes;
  for (const std::string& k : keys) bytes += 2 * k.size();
  return bytes;
}

void TcpStoreWaits::Park(uint64_t id, uint64_t conn,
                         std::vector<std::string> keys) {
  Wait& w = waits_[id];
  w.conn = conn;
  w.keys = std::move(keys);
  w.missing = w.keys.size();
  bytes_ += Bytes(w.keys);
  for (const std::string& k : w.keys) {
    KeyWaits& kw = by_key_[k];
    (w.missing == 1 ? kw.last : kw.multi).insert(id);
  }
}

std::vector<TcpStoreWaits::Woken> TcpStoreWaits::Arrived(
    absl::string_view key) {
  std::vector<Woken> woken;
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return woken;
  KeyWaits arrived = std::move(it->second);
  by_key_.erase(it);
  ArrivedFor(arrived.multi);
  for (uint64_t id : arrived.last) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;
    woken.push_back({id, w->second.conn});
    Drop(id);
  }
  return woken;
}

std::optional<TcpStoreWaits::Woken> TcpStoreWaits::ArrivedOnce(
    absl::string_view key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  const std::set<uint64_t> multi = std::move(it->second.multi);
  it->second.multi.clear();
  std::optional<Woken> woken;
  if (it->second.last.empty()) {
    by_key_.erase(it);
  } else {
    const uint64_t id = *it->second.last.begin();
    woken = Woken{id, waits_.find(id)->second.conn};
    Drop(id);  // and the key's entry with it if that was its last wait
  }
  // None of these can be filed under this key again: it no longer misses.
  ArrivedFor(multi);
  return woken;
}

void TcpStoreWaits::Drop(uint64_t id) {
  auto w = waits_.find(id);
  if (w == waits_.end()) return;
  for (const std::string& k : w->second.keys) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    it->second.multi.erase(id);
    it->second.last.erase(id);
    if (it->second.multi.empty() && it->second.last.empty()) by_key_.erase(it);
  }
  bytes_ -= Bytes(w->second.keys);
  waits_.erase(w);
}

void TcpStoreWaits::ArrivedFor(const std::set<uint64_t>& ids) {
  for (uint64_t id : ids) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;
    if (--w->second.missing == 1) OneMissing(id, w->second);
  }
}

void TcpStoreWaits::OneMissing(uint64_t id, const Wait& wait) {
  // The key still missing is the one whose index still holds the wait
  // (an arrived key's index no longer does); found once per wait.
  for (const std::string& k : wait.keys) {
    auto it = by_key_.find(k);
    if (it != by_key_.end() && it->second.multi.erase(id) > 0) {
      it->second.last.insert(id);
      return;
    }
  }
}

}  // namespace distjob
