// The operations the workers' TCPStore server serves (tcpstore_server.h),
// one handler each, and the parked waits they complete; the loop that
// reads and answers them is tcpstore_server.cc's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "workerstore/tcpstore_conn.h"
#include "workerstore/tcpstore_data.h"
#include "workerstore/tcpstore_protocol.h"
#include "workerstore/tcpstore_server_impl.h"
#include "workerstore/tcpstore_waits.h"

namespace distjob {

using tcpstore::Op;

bool TcpStoreServer::Impl::Execute(Conn& c, const tcpstore::Request& r) {
  switch (r.op) {
    case Op::kValidate:
      return OnValidate(c, r);
    case Op::kPing:
      return OnPing(c, r);
    case Op::kSet:
      return OnSet(c, r);
    case Op::kMultiSet:
      return OnMultiSet(c, r);
    case Op::kCompareSet:
      return OnCompareSet(c, r);
    case Op::kGet:
      return OnGet(c, r);
    case Op::kMultiGet:
      return OnMultiGet(c, r);
    case Op::kAdd:
      return OnAdd(c, r);
    case Op::kAppend:
      return OnAppend(c, r);
    case Op::kCheck:
      return OnCheck(c, r);
    case Op::kWait:
      return OnWait(c, r);
    case Op::kCancelWait:
      return OnCancelWait(c, r);
    case Op::kNumKeys:
      return OnNumKeys(c, r);
    case Op::kDeleteKey:
      return OnDeleteKey(c, r);
    case Op::kQueuePush:
      return OnQueuePush(c, r);
    case Op::kQueuePop:
      return OnQueuePop(c, r);
    case Op::kQueueLen:
      return OnQueueLen(c, r);
    case Op::kListKeys:
      return OnListKeys(c, r);
    case Op::kWatchKey:
    case Op::kBarrier:
    case Op::kCount:
      break;
  }
  return Violation(c, absl::StrCat(tcpstore::OpName(r.op),
                                   " is not supported by this server"));
}

bool TcpStoreServer::Impl::OnValidate(Conn& c, const tcpstore::Request& r) {
  if (r.word != tcpstore::kValidateMagic) {
    return Violation(c, "validate: wrong magic number");
  }
  return true;
}

bool TcpStoreServer::Impl::OnPing(Conn& c, const tcpstore::Request& r) {
  tcpstore::AppendU32(&c.out, r.word);
  return true;
}

bool TcpStoreServer::Impl::OnSet(Conn& c, const tcpstore::Request& r) {
  if (!Room(c, r.keys[0], r.values[0].size())) return false;
  Put(r.keys[0], r.values[0]);
  streamed_ = true;
  return true;
}

bool TcpStoreServer::Impl::OnMultiSet(Conn& c, const tcpstore::Request& r) {
  streamed_ = true;
  for (size_t i = 0; i < r.keys.size(); ++i) {
    if (!Room(c, r.keys[i], r.values[i].size())) return false;
    Put(r.keys[i], r.values[i]);
  }
  return true;
}

bool TcpStoreServer::Impl::OnCompareSet(Conn& c, const tcpstore::Request& r) {
  const TcpStoreValue* current = data_.Find(r.keys[0]);
  const absl::string_view expected = r.values[0], desired = r.values[1];
  if (current == nullptr) {
    if (expected.empty()) {
      if (!Room(c, r.keys[0], desired.size())) return false;
      Put(r.keys[0], desired);
      tcpstore::AppendBytes(&c.out, desired);
    } else {
      // As TCPStore: the expected value comes back although the key
      // does not exist, which the caller reads as a failed swap.
      tcpstore::AppendBytes(&c.out, expected);
    }
    return true;
  }
  if (current->bytes() == expected) {
    if (!Room(c, r.keys[0], desired.size())) return false;
    Put(r.keys[0], desired);
  }
  tcpstore::AppendBytes(&c.out, data_.Find(r.keys[0])->bytes());
  return true;
}

bool TcpStoreServer::Impl::OnGet(Conn& c, const tcpstore::Request& r) {
  const TcpStoreValue* value = data_.Find(r.keys[0]);
  if (value == nullptr) {
    // TCPStore's get throws here and drops the connection; its clients
    // always wait for the key first, so the key was deleted in between.
    return Violation(c, "get of a key that does not exist");
  }
  c.AppendValue(*value);
  return true;
}

bool TcpStoreServer::Impl::OnMultiGet(Conn& c, const tcpstore::Request& r) {
  // A small request may name one large value many times: the answer is
  // sized before any of it is queued.
  size_t answer = 0;
  found_.clear();
  for (absl::string_view k : r.keys) {
    const TcpStoreValue* value = data_.Find(k);
    if (value == nullptr) {
      return Violation(c, "multi_get of a key that does not exist");
    }
    answer += sizeof(uint64_t) + value->size();
    found_.push_back(value);
  }
  if (!AnswerFits(c, answer)) {
    return Violation(c,
                     absl::StrCat("multi_get answer of ", answer,
                                  " bytes over max_pending_output_", "bytes ",
                                  options_.max_pending_output_bytes));
  }
  // Large values are sent from the store's own buffers (AppendValue).
  for (const TcpStoreValue* value : found_) c.AppendValue(*value);
  return true;
}

bool TcpStoreServer::Impl::OnAdd(Conn& c, const tcpstore::Request& r) {
  int64_t value = r.number;
  if (const TcpStoreValue* stored = data_.Find(r.keys[0])) {
    int64_t old;
    if (!tcpstore::ParseStoredInt(stored->bytes(), &old)) {
      return Violation(c, "add to a value that is not a decimal number");
    }
    if (__builtin_add_overflow(old, r.number, &value)) {
      return Violation(c, "add overflows int64");
    }
  }
  std::string text = std::to_string(value);
  if (!Room(c, r.keys[0], text.size())) return false;
  Put(r.keys[0], text);
  tcpstore::AppendI64(&c.out, value);
  return true;
}

bool TcpStoreServer::Impl::OnAppend(Conn& c, const tcpstore::Request& r) {
  const TcpStoreValue* stored = data_.Find(r.keys[0]);
  if (stored == nullptr) {
    if (!Room(c, r.keys[0], r.values[0].size())) return false;
    Put(r.keys[0], r.values[0]);
    return true;
  }
  const size_t max_value_bytes = options_.limits.max_value_bytes;
  std::string v;
  v.reserve(stored->size() + r.values[0].size());
  v.append(stored->bytes().data(), stored->size())
      .append(r.values[0].data(), r.values[0].size());
  if (v.size() > max_value_bytes) {
    return Violation(c, absl::StrCat("append makes a value over "
                                     "max_value_bytes ",
                                     max_value_bytes));
  }
  if (!Room(c, r.keys[0], v.size())) return false;
  Put(r.keys[0], v);
  return true;
}

bool TcpStoreServer::Impl::OnCheck(Conn& c, const tcpstore::Request& r) {
  bool all = true;
  for (absl::string_view k : r.keys) all = all && data_.Exists(k);
  tcpstore::AppendU8(&c.out, all ? tcpstore::kReady : tcpstore::kNotReady);
  return true;
}

bool TcpStoreServer::Impl::OnWait(Conn& c, const tcpstore::Request& r) {
  std::vector<absl::string_view> missing;
  for (absl::string_view k : r.keys) {
    if (!data_.Exists(k)) missing.push_back(k);
  }
  // A key named twice is waited for once, and held once. Sorted as views:
  // a gloo rank waits on 512 keys at once, and sorting their copies cost
  // more than the copies.
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  std::vector<std::string> keys(missing.begin(), missing.end());
  if (keys.empty()) {
    tcpstore::AppendU8(&c.out, tcpstore::kStopWaiting);
    return true;
  }
  const size_t max_waiters_per_peer = options_.limits.max_waiters_per_peer;
  if (c.waits.size() >= max_waiters_per_peer) {
    return Violation(c,
                     absl::StrCat("max_waiters_per_peer ", max_waiters_per_peer,
                                  " parked waits on one connection"));
  }
  return ParkWait(c, std::move(keys));
}

bool TcpStoreServer::Impl::OnCancelWait(Conn& c, const tcpstore::Request&) {
  absl::flat_hash_set<uint64_t> ids;
  ids.swap(c.waits);
  for (uint64_t wid : ids) DropWait(wid);
  tcpstore::AppendU8(&c.out, tcpstore::kWaitCanceled);
  return true;
}

bool TcpStoreServer::Impl::OnNumKeys(Conn& c, const tcpstore::Request&) {
  tcpstore::AppendI64(&c.out, static_cast<int64_t>(data_.values().size()));
  return true;
}

bool TcpStoreServer::Impl::OnDeleteKey(Conn& c, const tcpstore::Request& r) {
  const bool existed = data_.Erase(r.keys[0]);
  tcpstore::AppendI64(&c.out, existed ? 1 : 0);
  return true;
}

bool TcpStoreServer::Impl::OnQueuePush(Conn& c, const tcpstore::Request& r) {
  if (!data_.Push(r.keys[0], r.values[0])) {
    return Violation(
        c, absl::StrCat("max_total_bytes ", options_.limits.max_total_bytes));
  }
  Wake(r.keys[0], /*one=*/true);
  return true;
}

bool TcpStoreServer::Impl::OnQueuePop(Conn& c, const tcpstore::Request& r) {
  const size_t size = data_.QueueLength(r.keys[0]);
  tcpstore::AppendI64(&c.out, static_cast<int64_t>(size));
  if (size > 0) tcpstore::AppendBytes(&c.out, *data_.Pop(r.keys[0]));
  return true;
}

bool TcpStoreServer::Impl::OnQueueLen(Conn& c, const tcpstore::Request& r) {
  tcpstore::AppendI64(&c.out,
                      static_cast<int64_t>(data_.QueueLength(r.keys[0])));
  return true;
}

bool TcpStoreServer::Impl::OnListKeys(Conn& c, const tcpstore::Request&) {
  const TcpStoreData::Values& values = data_.values();
  size_t answer = sizeof(int64_t);
  for (const auto& [k, v] : values) answer += sizeof(uint64_t) + k.size();
  if (!AnswerFits(c, answer)) {
    return Violation(c,
                     absl::StrCat("list_keys answer of ", answer,
                                  " bytes over max_pending_output_", "bytes ",
                                  options_.max_pending_output_bytes));
  }
  tcpstore::AppendI64(&c.out, static_cast<int64_t>(values.size()));
  for (const auto& [k, v] : values) tcpstore::AppendBytes(&c.out, k);
  return true;
}

bool TcpStoreServer::Impl::AnswerFits(const Conn& c, size_t answer) const {
  return c.PendingOutput() + answer <= options_.max_pending_output_bytes;
}

void TcpStoreServer::Impl::Put(absl::string_view key, absl::string_view value) {
  data_.Put(key, value);
  Wake(key);
}

void TcpStoreServer::Impl::Wake(absl::string_view key, bool one) {
  const size_t parked = waits_.size();
  if (one) {
    if (auto woken = waits_.ArrivedOnce(key)) Answer(*woken);
  } else {
    for (const TcpStoreWaits::Woken& woken : waits_.Arrived(key)) {
      Answer(woken);
    }
  }
  if (waits_.size() != parked) {
    parked_.store(static_cast<int64_t>(waits_.size()),
                  std::memory_order_relaxed);
  }
}

void TcpStoreServer::Impl::Answer(const TcpStoreWaits::Woken& woken) {
  budgets_.RemoveWait(woken.id);
  auto c = conns_.find(woken.conn);
  if (c == conns_.end()) return;
  Conn& conn = *c->second;
  conn.waits.erase(woken.id);
  tcpstore::AppendU8(&conn.out, tcpstore::kStopWaiting);
  MarkDirty(conn);
}

bool TcpStoreServer::Impl::ParkWait(Conn& c, std::vector<std::string> keys) {
  const size_t bytes = TcpStoreWaits::Bytes(keys);
  for (;;) {
    const PeerBudgets::Verdict v = budgets_.AdmitWait(c.ip, bytes);
    if (v.kind == PeerBudgets::Verdict::kAdmit) break;
    if (v.kind == PeerBudgets::Verdict::kRefuse) return Violation(c, v.reason);
    // Another address's connection: never `c`, whose Conn& stays valid.
    Evict(v);
  }
  const uint64_t wid = next_wait_id_++;
  waits_.Park(wid, c.id, std::move(keys));
  budgets_.AddWait(c.ip, c.id, wid, bytes);
  c.waits.insert(wid);
  parked_.store(static_cast<int64_t>(waits_.size()), std::memory_order_relaxed);
  return true;
}

void TcpStoreServer::Impl::DropWait(uint64_t wait_id) {
  waits_.Drop(wait_id);
  budgets_.RemoveWait(wait_id);
  parked_.store(static_cast<int64_t>(waits_.size()), std::memory_order_relaxed);
}

}  // namespace distjob
