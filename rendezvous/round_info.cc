#include "rendezvous/round_info.h"

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/logging.h"

namespace distjob {

std::string EncodeRoundInfo(const RoundInfo& info) {
  Json j;
  j["min_nodes"] = info.min_nodes;
  j["max_nodes"] = info.max_nodes;
  j["last_call_timeout_ms"] = absl::ToInt64Milliseconds(info.last_call_timeout);
  if (info.last_call_ends.has_value()) {
    j["last_call_ends_unix_ms"] = absl::ToUnixMillis(*info.last_call_ends);
  }
  return DumpJson(j);
}

absl::StatusOr<RoundInfo> DecodeRoundInfo(absl::string_view text) {
  auto j = ParseJson(text, "round info");
  if (!j.ok()) return j.status();
  const auto number = [&](const char* name) -> std::optional<int64_t> {
    auto it = j->find(name);
    if (it == j->end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  const auto min = number("min_nodes"), max = number("max_nodes"),
             timeout = number("last_call_timeout_ms");
  if (!j->is_object() || !min || !max || !timeout || *min < 0 || *max < *min ||
      *max > (int64_t{1} << 30) || *timeout < 0) {
    return absl::InvalidArgumentError(
        "round info: not min_nodes <= max_nodes and a last call timeout");
  }
  RoundInfo info;
  info.min_nodes = static_cast<int>(*min);
  info.max_nodes = static_cast<int>(*max);
  info.last_call_timeout = absl::Milliseconds(*timeout);
  if (auto ends = number("last_call_ends_unix_ms"); ends.has_value()) {
    info.last_call_ends = absl::FromUnixMillis(*ends);
  }
  return info;
}

void PublishRoundInfo(StoreInterface* store, const std::string& key,
                      int64_t round, const RoundInfo& info) {
  if (auto s = store->Set(key, EncodeRoundInfo(info)).status(); !s.ok()) {
    DJ_LOG_DEBUG("round {}: cannot write its round info: {}", round,
                 s.message());
  }
}

}  // namespace distjob
