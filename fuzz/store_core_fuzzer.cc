// The rendezvous store's request handling: the bytes decode into a bounded
// sequence of store operations with the values a client controls on the
// wire (keys, values, deltas, revisions, and ttl/timeout milliseconds as
// rendezvous/store/server/store_server.cc converts them), run against a
// StoreCore with tight limits on a fake clock. Checks that every blocking call
// is answered exactly once by the time the core is gone.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/store/fake_store_clock.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

constexpr int kMaxOps = 64;

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  uint8_t Byte() { return p_ == end_ ? 0 : *p_++; }
  int64_t Int64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | Byte();
    return static_cast<int64_t>(v);
  }
  // Mostly a few short names, so that operations meet on the same keys;
  // sometimes raw bytes, sometimes past the key limit.
  std::string Key() {
    const uint8_t b = Byte();
    if (b < 160) return std::string("k/") + static_cast<char>('a' + b % 6);
    if (b < 200) return std::string(b < 196 ? 16 : 80, 'x');
    return Bytes(b % 24);
  }
  std::string Value() {
    const uint8_t b = Byte();
    if (b < 64) return std::to_string(static_cast<int>(b) - 32);
    if (b >= 250) return std::string(static_cast<size_t>(b - 249) * 100, 'v');
    return Bytes(b % 40);
  }
  std::vector<std::string> Keys() {
    std::vector<std::string> keys(Byte() % 12);
    for (std::string& k : keys) k = Key();
    return keys;
  }
  // A ttl or timeout: the wire's int64 milliseconds.
  absl::Duration Millis() {
    const uint8_t b = Byte();
    if (b < 100) return absl::ZeroDuration();
    if (b < 200) return absl::Milliseconds(b - 150);
    if (b < 250) return absl::Seconds(b - 200);
    return absl::Milliseconds(Int64());
  }

 private:
  std::string Bytes(size_t n) {
    std::string s;
    while (n-- > 0 && !empty()) s.push_back(static_cast<char>(Byte()));
    return s;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace
}  // namespace distjob

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using distjob::StoreCore;
  distjob::Reader in(data, size);
  distjob::FakeStoreClock clock;
  std::atomic<int> asked{0};
  std::atomic<int> answered{0};
  {
    distjob::StoreLimits limits;
    limits.max_key_bytes = 64;
    limits.max_value_bytes = 512;
    limits.max_keys_per_request = 8;
    limits.max_total_bytes = 2048;
    limits.max_waiters = 16;
    limits.max_tombstones = 8;
    StoreCore core(limits, &clock);
    for (int op = 0; op < distjob::kMaxOps && !in.empty(); ++op) {
      switch (in.Byte() % 12) {
        case 0: {
          std::vector<std::pair<std::string, std::string>> kvs(in.Byte() % 10);
          for (auto& kv : kvs) kv = {in.Key(), in.Value()};
          (void)core.MultiSet(kvs, in.Millis());
          break;
        }
        case 1:
          ++asked;
          core.MultiGet(in.Keys(), in.Millis(),
                        [&answered](auto) { ++answered; });
          break;
        case 2: {
          std::string key = in.Key();
          const int64_t delta = in.Int64();
          if (in.Byte() % 2 == 0) {
            (void)core.Add(key, delta);
          } else {
            std::string prefix = in.Key();
            (void)core.AddThenRecord(key, delta, prefix, in.Value());
          }
          break;
        }
        case 3: {
          std::string key = in.Key();
          std::string expected = in.Value();
          (void)core.CompareSet(key, expected, in.Value());
          break;
        }
        case 4: {
          std::string key = in.Key();
          (void)core.Append(key, in.Value());
          break;
        }
        case 5:
          (void)core.Check(in.Keys());
          break;
        case 6:
          (void)core.Delete(in.Keys());
          break;
        case 7:
          (void)core.NumKeys();
          (void)core.Stats();
          break;
        case 8:
          (void)core.List(in.Key());
          break;
        case 9: {
          ++asked;
          std::string prefix = in.Key();
          const int64_t after = in.Byte() < 128 ? in.Byte() : in.Int64();
          core.Watch(prefix, after, in.Millis(),
                     [&answered](auto) { ++answered; });
          break;
        }
        case 10:
          // Time moves; the core's timer expires what is due on its next
          // tick, or the destructor's CancelAll answers it.
          clock.Advance(absl::Milliseconds(in.Byte()) * 100);
          break;
        case 11:
          if (in.Byte() == 0) core.CancelAll();
          break;
      }
    }
  }
  if (asked.load() != answered.load()) {
    fprintf(stderr, "%d blocking calls, %d answers\n", asked.load(),
            answered.load());
    abort();
  }
  return 0;
}
