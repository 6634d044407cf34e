#include "rendezvous/store/tcpstore_waits.h"

#include <utility>

#include "rendezvous/store/store_core.h"

namespace distjob {

size_t TcpStoreWaits::Bytes(const std::vector<std::string>& keys) {
  size_t bytes = StoreCore::kWaiterOverhead;
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
  for (const std::string& k : w.keys) by_key_[k].all.insert(id);
  if (w.missing == 1) by_key_[w.keys[0]].last.insert(id);
}

std::vector<TcpStoreWaits::Woken> TcpStoreWaits::Arrived(
    absl::string_view key) {
  std::vector<Woken> woken;
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return woken;
  const std::set<uint64_t> ids = std::move(it->second.all);
  by_key_.erase(it);
  for (uint64_t id : ids) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;
    if (--w->second.missing == 1) OneMissing(id, w->second);
    if (w->second.missing > 0) continue;
    woken.push_back({id, w->second.conn});
    Drop(id);
  }
  return woken;
}

std::optional<TcpStoreWaits::Woken> TcpStoreWaits::ArrivedOnce(
    absl::string_view key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || it->second.last.empty()) return std::nullopt;
  const uint64_t id = *it->second.last.begin();
  auto w = waits_.find(id);
  const Woken woken{id, w->second.conn};
  Drop(id);
  return woken;
}

void TcpStoreWaits::Drop(uint64_t id) {
  auto w = waits_.find(id);
  if (w == waits_.end()) return;
  for (const std::string& k : w->second.keys) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    it->second.all.erase(id);
    it->second.last.erase(id);
    if (it->second.all.empty()) by_key_.erase(it);
  }
  bytes_ -= Bytes(w->second.keys);
  waits_.erase(w);
}

void TcpStoreWaits::OneMissing(uint64_t id, const Wait& wait) {
  // The key still missing is the one whose index still holds the wait
  // (an arrived key's index no longer does); found once per wait.
  for (const std::string& k : wait.keys) {
    auto it = by_key_.find(k);
    if (it != by_key_.end() && it->second.all.count(id) > 0) {
      it->second.last.insert(id);
      return;
    }
  }
}

}  // namespace distjob
