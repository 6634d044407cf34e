#include "workerstore/peer_budgets.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace distjob {
namespace {

size_t Share(size_t global, size_t per_peer) {
  return std::min(per_peer, std::max<size_t>(1, global / PeerBudgets::kShare));
}

}  // namespace

PeerBudgets::Limits PeerBudgets::WithShare(Limits l) {
  l.connections_per_peer = Share(l.connections, l.connections_per_peer);
  l.waits_per_peer = Share(l.waits, l.waits_per_peer);
  l.wait_bytes_per_peer = Share(l.wait_bytes, l.wait_bytes_per_peer);
  return l;
}

PeerBudgets::Usage PeerBudgets::PeerUsage(const std::string& ip) const {
  auto it = peers_.find(ip);
  if (it == peers_.end()) return {};
  return {it->second.conns.size(), it->second.waits.size(),
          it->second.wait_bytes};
}

PeerBudgets::Verdict PeerBudgets::AdmitConnection(const std::string& ip) const {
  const Usage u = PeerUsage(ip);
  if (u.connections >= limits_.connections_per_peer) {
    return {Verdict::kRefuse,
            absl::StrCat("max_connections_per_peer ",
                         limits_.connections_per_peer, " reached"),
            0};
  }
  if (connections_ < limits_.connections) return {};
  return Full(
      ip, [](const Peer& p) { return p.conns.size(); }, false,
      absl::StrCat("max_connections ", limits_.connections, " reached"));
}

PeerBudgets::Verdict PeerBudgets::AdmitWait(const std::string& ip,
                                            size_t bytes) const {
  const Usage u = PeerUsage(ip);
  if (u.waits >= limits_.waits_per_peer) {
    return {Verdict::kRefuse,
            absl::StrCat("an address's share of max_waiters: ",
                         limits_.waits_per_peer, " parked waits"),
            0};
  }
  if (u.wait_bytes + bytes > limits_.wait_bytes_per_peer) {
    return {Verdict::kRefuse,
            absl::StrCat("an address's share of max_waiter_bytes: ",
                         limits_.wait_bytes_per_peer),
            0};
  }
  if (waits_.size() >= limits_.waits) {
    return Full(
        ip, [](const Peer& p) { return p.waits.size(); }, true,
        absl::StrCat("max_waiters ", limits_.waits, " parked waits in all"));
  }
  if (wait_bytes_ + bytes > limits_.wait_bytes) {
    return Full(
        ip, [](const Peer& p) { return p.wait_bytes; }, true,
        absl::StrCat("max_waiter_bytes ", limits_.wait_bytes, " in all"));
  }
  return {};
}

PeerBudgets::Verdict PeerBudgets::Full(const std::string& ip, Measure measure,
                                       bool wait_victim,
                                       std::string reason) const {
  auto own = peers_.find(ip);
  const size_t mine = own == peers_.end() ? 0 : measure(own->second);
  const std::pair<const std::string, Peer>* heaviest = nullptr;
  for (const auto& entry : peers_) {
    if (entry.first == ip) continue;
    if (heaviest == nullptr ||
        measure(entry.second) > measure(heaviest->second)) {
      heaviest = &entry;
    }
  }
  // A tie refuses the newcomer: evicting an equal would only move the
  // starvation, and the request refused is the newest of a heaviest one.
  if (heaviest == nullptr || measure(heaviest->second) <= mine) {
    return {Verdict::kRefuse, std::move(reason), 0};
  }
  const Peer& victim = heaviest->second;
  uint64_t conn = 0;
  if (wait_victim && !victim.waits.empty()) {
    conn = victim.waits.rbegin()->second.conn;
  } else if (!victim.conns.empty()) {
    conn = *victim.conns.rbegin();
  } else {
    return {Verdict::kRefuse, std::move(reason), 0};
  }
  return {Verdict::kEvict,
          absl::StrCat(reason, " and ", heaviest->first,
                       " holds the most; its newest gives way to ", ip),
          conn};
}

void PeerBudgets::AddConnection(const std::string& ip, uint64_t conn) {
  if (peers_[ip].conns.insert(conn).second) ++connections_;
}

void PeerBudgets::RemoveConnection(const std::string& ip, uint64_t conn) {
  auto it = peers_.find(ip);
  if (it == peers_.end()) return;
  if (it->second.conns.erase(conn) > 0) --connections_;
  Forget(it);
}

void PeerBudgets::AddWait(const std::string& ip, uint64_t conn, uint64_t wait,
                          size_t bytes) {
  auto& entry = *peers_.try_emplace(ip).first;
  Peer& p = entry.second;
  if (!p.waits.emplace(wait, Wait{conn, bytes}).second) return;
  p.wait_bytes += bytes;
  wait_bytes_ += bytes;
  waits_[wait] = &entry;
}

void PeerBudgets::RemoveWait(uint64_t wait) {
  auto w = waits_.find(wait);
  if (w == waits_.end()) return;
  const std::string ip = w->second->first;
  Peer& p = w->second->second;
  waits_.erase(w);
  auto entry = p.waits.find(wait);
  p.wait_bytes -= entry->second.bytes;
  wait_bytes_ -= entry->second.bytes;
  p.waits.erase(entry);
  Forget(peers_.find(ip));
}

void PeerBudgets::Forget(std::unordered_map<std::string, Peer>::iterator it) {
  if (it->second.conns.empty() && it->second.waits.empty()) peers_.erase(it);
}

}  // namespace distjob
