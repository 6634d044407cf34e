#include "rendezvous/store/etcd/keys.h"

#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace distjob::etcd {

Keys::Keys(const std::string& prefix, const std::string& run_id) {
  const std::string ns = absl::StrCat(prefix, "/", run_id, "/");
  data = ns + "kv/";
  meta = ns + "agent/";
  counters = ns + "ctr/";
  std::random_device random;
  adds = absl::StrCat(meta, "adds/", absl::Hex(random()), absl::Hex(random()),
                      "/");
}

void Keys::ForgetCounter(etcdserverpb::TxnRequest* t,
                         const std::string& key) const {
  t->add_success()->mutable_request_delete_range()->set_key(counters + key);
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

int64_t TtlSeconds(absl::Duration d) {
  return std::max<int64_t>(
      1, absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))));
}

std::optional<int64_t> CounterOf(const mvccpb::KeyValue& seq) {
  int64_t base = 0;
  if (!absl::SimpleAtoi(seq.value(), &base)) return std::nullopt;
  return base + seq.version() - 1;
}

std::optional<int64_t> CounterOf(const etcdserverpb::RangeResponse& seq) {
  if (seq.kvs_size() == 0) return std::nullopt;
  return CounterOf(seq.kvs(0));
}

std::optional<std::string> ValueOf(const etcdserverpb::RangeResponse& value,
                                   const etcdserverpb::RangeResponse& seq) {
  if (auto n = CounterOf(seq); n.has_value()) return absl::StrCat(*n);
  if (value.kvs_size() == 0) return std::nullopt;
  return value.kvs(0).value();
}

}  // namespace distjob::etcd
