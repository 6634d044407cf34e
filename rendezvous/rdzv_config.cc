#include "rendezvous/rdzv_config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/duration.h"
#include "common/net.h"
#include "common/text.h"

namespace distjob {

std::string Endpoint::ToString() const {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<Endpoint> ParseEndpoint(const std::string& text,
                                       int default_port) {
  Endpoint ep;
  ep.port = default_port;
  std::string port_text;
  if (text.empty()) {
    ep.host = "localhost";
    return ep;
  }
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv-endpoint ", QuoteForMessage(text), ": ", why,
                     "; expected HOST[:PORT], [V6][:PORT] or a bare IPv6 "
                     "address"));
  };
  if (absl::StrContains(text, "://")) return invalid("a URL, not an address");
  bool bracketed = false;
  if (text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return invalid("unclosed '['");
    ep.host = text.substr(1, close - 1);
    bracketed = true;
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return invalid("text after ']'");
      port_text = text.substr(close + 2);
      if (port_text.empty()) return invalid("empty port");
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') != colon) {
      // Several colons: only an IPv6 literal has them.
      if (!IsIpLiteral(text)) return invalid("more than one ':'");
      ep.host = text;
    } else if (colon != std::string::npos) {
      ep.host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      if (port_text.empty()) return invalid("empty port");
    } else {
      ep.host = text;
    }
  }
  if (!port_text.empty()) {
    const bool digits =
        port_text.size() <= 5 &&
        std::all_of(port_text.begin(), port_text.end(),
                    [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !absl::SimpleAtoi(port_text, &ep.port) || ep.port > 65535) {
      return invalid("the port must be 0..65535");
    }
  }
  if (ep.host.empty() && !bracketed && !port_text.empty()) {
    ep.host = "localhost";  // ":PORT", as torchrun reads it
  }
  if (bracketed && !IsIpLiteral(ep.host)) {
    return invalid("only an IPv6 address goes in brackets");
  }
  if (absl::Status s = CheckHostName(ep.host, "--rdzv-endpoint host");
      !s.ok()) {
    return s;
  }
  return ep;
}

namespace {

absl::StatusOr<absl::Duration> Seconds(absl::string_view key,
                                       absl::string_view value) {
  double s = 0;
  if (!absl::SimpleAtod(value, &s) || !std::isfinite(s) || s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv-conf ", key, "=", QuoteForMessage(value),
                     ": expected a non-negative, finite number of seconds"));
  }
  if (s > absl::ToDoubleSeconds(kMaxDuration)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-conf ", key, "=", QuoteForMessage(value), ": at most ",
        absl::ToInt64Seconds(kMaxDuration), " seconds (365 days)"));
  }
  return absl::Seconds(s);
}

// The store host's limits: a key, where it goes, and its accepted range.
// The value cap stays under the store's 8 MiB gRPC message limit.
struct StoreLimitKey {
  const char* key;
  int64_t RdzvConfig::*field;
  int64_t min;
  int64_t max;
};
constexpr StoreLimitKey kStoreLimitKeys[] = {
    {"store_max_memory_mb", &RdzvConfig::store_max_memory_mb, 16, 65536},
    {"store_max_value_kb", &RdzvConfig::store_max_value_kb, 1, 4096},
    {"store_max_parked", &RdzvConfig::store_max_parked, 64, 1000000},
    {"store_max_conns", &RdzvConfig::store_max_conns, 16, 65536},
    {"store_max_conns_per_peer", &RdzvConfig::store_max_conns_per_peer, 4,
     65536},
};

// The keys this file reads, then the etcd backend's (ParseEtcdOptions in
// rendezvous/store/etcd/options.cc), which the conf carries to it.
const std::vector<std::string>& AcceptedKeys() {
  static const auto* keys =
      new std::vector<std::string>{"join_timeout",
                                   "last_call_timeout",
                                   "close_timeout",
                                   "heartbeat_timeout",
                                   "keep_alive_interval",
                                   "keep_alive_max_attempt",
                                   "read_timeout",
                                   "is_host",
                                   "exit_barrier_timeout",
                                   "worker_store_resolve_timeout",
                                   "store_max_memory_mb",
                                   "store_max_value_kb",
                                   "store_max_parked",
                                   "store_max_conns",
                                   "store_max_conns_per_peer",
                                   "etcd_prefix",
                                   "ca_cert",
                                   "cert",
                                   "key",
                                   "etcd_session_ttl"};
  return *keys;
}

// Keys torchrun's handlers read that have no meaning here: the store is
// always the agent's own, and the etcd TLS files have their own names.
const std::vector<std::string>& TorchrunOnlyKeys() {
  static const auto* keys = new std::vector<std::string>{
      "store_type", "timeout", "use_libuv", "protocol",
      "cacert",     "ttl",     "local_addr"};
  return *keys;
}

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  for (const std::string& item : list) {
    if (item == s) return true;
  }
  return false;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ClosestMatch(const std::string& word,
                         const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(absl::AsciiStrToLower(word), c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // Beyond about a third of the word it is another word, not a typo.
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_distance <= limit ? best : std::string();
}

absl::StatusOr<RdzvBackend> ParseRdzvBackend(const std::string& text) {
  if (text == "static") return RdzvBackend::kStatic;
  if (text == "c10d") return RdzvBackend::kC10d;
  if (text == "etcd") return RdzvBackend::kEtcd;
  if (text == "etcd-v3") return RdzvBackend::kEtcdV3;
  return absl::InvalidArgumentError(
      absl::StrCat("--rdzv-backend '", text,
                   "' is not supported; expected c10d, etcd, etcd-v3 or "
                   "static"));
}

const char* RdzvBackendName(RdzvBackend backend) {
  switch (backend) {
    case RdzvBackend::kStatic:
      return "static";
    case RdzvBackend::kC10d:
      return "c10d";
    case RdzvBackend::kEtcd:
      return "etcd";
    case RdzvBackend::kEtcdV3:
      return "etcd-v3";
  }
  return "static";
}

namespace {

// The field of a key that takes seconds; nullptr for any other key.
absl::Duration* DurationField(const std::string& key, RdzvConfig* c) {
  if (key == "join_timeout") return &c->join_timeout;
  if (key == "last_call_timeout") return &c->last_call_timeout;
  if (key == "close_timeout") return &c->close_timeout;
  if (key == "heartbeat_timeout") return &c->heartbeat_timeout;
  if (key == "keep_alive_interval") return &c->keep_alive_interval;
  if (key == "read_timeout") return &c->read_timeout;
  if (key == "exit_barrier_timeout") return &c->exit_barrier_timeout;
  if (key == "worker_store_resolve_timeout") {
    return &c->worker_store_resolve_timeout;
  }
  return nullptr;
}

const StoreLimitKey* FindStoreLimitKey(const std::string& key) {
  for (const StoreLimitKey& k : kStoreLimitKeys) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

absl::Status ParseIsHost(const std::string& value,
                         std::optional<bool>* is_host) {
  const std::string v = absl::AsciiStrToLower(value);
  if (v == "1" || v == "true" || v == "t" || v == "yes" || v == "y") {
    *is_host = true;
  } else if (v == "0" || v == "false" || v == "f" || v == "no" || v == "n") {
    *is_host = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-conf is_host=", value, ": expected true|false|1|0"));
  }
  return absl::OkStatus();
}

// One KEY=VALUE item into `c`: a key of torchrun's that has no meaning
// here is a notice, an unknown one an error naming the nearest.
absl::Status SetRdzvConfKey(const std::string& key, const std::string& value,
                            RdzvConfig* c, std::vector<std::string>* notices) {
  if (absl::Duration* d = DurationField(key, c)) {
    auto v = Seconds(key, value);
    if (!v.ok()) return v.status();
    *d = *v;
  } else if (const StoreLimitKey* limit = FindStoreLimitKey(key)) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < limit->min || n > limit->max) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv-conf ", key, "=", QuoteForMessage(value),
          ": expected an integer from ", limit->min, " to ", limit->max));
    }
    c->*(limit->field) = n;
  } else if (key == "keep_alive_max_attempt") {
    if (!absl::SimpleAtoi(value, &c->keep_alive_max_attempt) ||
        c->keep_alive_max_attempt < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv-conf keep_alive_max_attempt=", value,
                       ": expected a positive integer"));
    }
  } else if (key == "is_host") {
    return ParseIsHost(value, &c->is_host);
  } else if (Contains(TorchrunOnlyKeys(), key)) {
    if (notices != nullptr) {
      notices->push_back(absl::StrCat("--rdzv-conf ", key, "=", value,
                                      ": a torchrun key the agent does not "
                                      "use; ignored"));
    }
  } else if (!Contains(AcceptedKeys(), key)) {
    const std::string near = ClosestMatch(key, AcceptedKeys());
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-conf: unknown key '", key, "'",
        near.empty() ? "" : absl::StrCat("; did you mean '", near, "'?"),
        " (accepted: ", absl::StrJoin(AcceptedKeys(), ", "), ")"));
  }
  return absl::OkStatus();
}

// What the keys must be together; the resolve timeout's default fitted
// to close_timeout unless `resolve_timeout_set`.
absl::Status CheckRdzvConfig(bool resolve_timeout_set, RdzvConfig* c) {
  // Zero would renew the lease in a busy loop and, with the lease's
  // lifetime interval × attempts at zero, switch dead-peer detection off.
  if (c->keep_alive_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--rdzv-conf keep_alive_interval=0: expected a positive number of "
        "seconds (default 5)");
  }
  // Zero would admit no member at all.
  if (c->worker_store_resolve_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--rdzv-conf worker_store_resolve_timeout=0: expected a positive "
        "number of seconds (default 10)");
  }
  // Group rank 0 resolves the members before it writes the round's master
  // record, which the other nodes wait for up to close_timeout: a pass as
  // long would fail their round. The default yields to a short
  // close_timeout; a value given explicitly must fit.
  if (!resolve_timeout_set) {
    c->worker_store_resolve_timeout =
        std::min(c->worker_store_resolve_timeout, c->close_timeout / 2);
  } else if (c->worker_store_resolve_timeout >= c->close_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-conf worker_store_resolve_timeout=",
        absl::FormatDuration(c->worker_store_resolve_timeout),
        ": must be less than close_timeout (",
        absl::FormatDuration(c->close_timeout),
        "), how long the other nodes wait for group rank 0, which resolves "
        "the members first"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RdzvConfig> ParseRdzvConf(const std::string& text,
                                         std::vector<std::string>* notices) {
  RdzvConfig c;
  if (text.empty()) return c;
  bool resolve_timeout_set = false;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string key(absl::StripAsciiWhitespace(kv.first));
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    if (key.empty() || value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv-conf '", text, "': each item must be KEY=VALUE"));
    }
    if (key == "worker_store_resolve_timeout") resolve_timeout_set = true;
    if (absl::Status s = SetRdzvConfKey(key, value, &c, notices); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CheckRdzvConfig(resolve_timeout_set, &c); !s.ok()) {
    return s;
  }
  return c;
}

bool IsLocalHost(const std::string& host_in) {
  const std::string host = absl::AsciiStrToLower(host_in);
  if (host == "localhost" || absl::StartsWith(host, "127.") || host == "::1" ||
      host == "0.0.0.0" || host == "::") {
    return true;
  }
  if (const std::string name = LocalHostname(); !name.empty()) {
    const std::string me = absl::AsciiStrToLower(name);
    // The FQDN and Volcano's <hostname>.<subdomain> both start with it.
    if (host == me || absl::StartsWith(host, me + ".")) return true;
  }
  ifaddrs* addrs = nullptr;
  if (getifaddrs(&addrs) != 0) return false;
  bool match = false;
  for (ifaddrs* a = addrs; a != nullptr && !match; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr,
                text, sizeof(text));
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6,
                &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                sizeof(text));
    } else {
      continue;
    }
    match = host == text;
  }
  freeifaddrs(addrs);
  return match;
}

}  // namespace distjob
