// The TCPStore server's parked waits (workerstore/tcpstore_waits.h)
// against a model that keeps each wait's missing keys and scans every
// wait (the server's way before the per-key index): each byte is an
// operation (park, a key arriving, a queue item, a drop), and every answer,
// the count and the bytes must be the model's.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "workerstore/tcpstore_waits.h"

namespace distjob {
namespace {

constexpr int kKeys = 5;

std::string Key(int k) { return "/k" + std::to_string(k % kKeys); }

struct Model {
  struct Wait {
    std::vector<std::string> keys;
    std::set<std::string> missing;
  };
  std::map<uint64_t, Wait> waits;  // ordered by id: arrival order

  std::vector<uint64_t> Arrived(const std::string& key) {
    std::vector<uint64_t> woken;
    for (auto it = waits.begin(); it != waits.end();) {
      if (it->second.missing.erase(key) > 0 && it->second.missing.empty()) {
        woken.push_back(it->first);
        it = waits.erase(it);
      } else {
        ++it;
      }
    }
    return woken;
  }
  // The item goes to the oldest wait that misses only `key`; the waits
  // that miss other keys too no longer miss it.
  std::optional<uint64_t> ArrivedOnce(const std::string& key) {
    std::optional<uint64_t> woken;
    for (const auto& [id, w] : waits) {
      if (w.missing == std::set<std::string>{key}) {
        woken = id;
        break;
      }
    }
    for (auto& [id, w] : waits) {
      if (w.missing.size() > 1) w.missing.erase(key);
    }
    if (woken) waits.erase(*woken);
    return woken;
  }
  size_t Bytes() const {
    size_t bytes = 0;
    for (const auto& [id, w] : waits) bytes += TcpStoreWaits::Bytes(w.keys);
    return bytes;
  }
};

void Fuzz(const uint8_t* data, size_t size) {
  TcpStoreWaits waits;
  Model model;
  uint64_t next_id = 1;
  std::map<uint64_t, uint64_t> conn_of;  // every wait's, as parked
  for (size_t i = 0; i < size; ++i) {
    const uint8_t op = data[i] >> 5, arg = data[i] & 31;
    if (op <= 2) {  // park on 1-3 distinct keys from arg's bits
      std::set<std::string> keys;
      for (int b = 0; b <= op; ++b) keys.insert(Key(arg >> b));
      const std::vector<std::string> list(keys.begin(), keys.end());
      conn_of[next_id] = arg % 3u;
      model.waits[next_id] = {list, keys};
      waits.Park(next_id, conn_of[next_id], list);
      ++next_id;
    } else if (op <= 4) {
      std::vector<uint64_t> got;
      for (const auto& w : waits.Arrived(Key(arg))) {
        if (w.conn != conn_of[w.id]) std::abort();
        got.push_back(w.id);
      }
      if (got != model.Arrived(Key(arg))) std::abort();
    } else if (op <= 6) {
      const auto got = waits.ArrivedOnce(Key(arg));
      const auto want = model.ArrivedOnce(Key(arg));
      if (got.has_value() != want.has_value()) std::abort();
      if (got && (got->id != *want || got->conn != conn_of[got->id])) {
        std::abort();
      }
    } else {
      const uint64_t id = next_id > arg ? next_id - 1 - arg : 0;
      waits.Drop(id);
      model.waits.erase(id);
    }
    if (waits.size() != model.waits.size() || waits.bytes() != model.Bytes()) {
      std::abort();
    }
  }
}

}  // namespace
}  // namespace distjob

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distjob::Fuzz(data, size);
  return 0;
}
