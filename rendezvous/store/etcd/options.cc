#include "rendezvous/store/etcd/options.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/net.h"
#include "common/text.h"

namespace distjob {
namespace {

// etcd tools accept http(s)://HOST:PORT; gRPC wants HOST:PORT. Anything
// else is refused here: a garbled endpoint would otherwise only show as
// the store being unreachable, after the whole join timeout.
absl::StatusOr<std::string> NormalizeEndpoint(absl::string_view given) {
  absl::string_view ep = given;
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-endpoint ", QuoteForMessage(given), ": ", why,
        "; expected [http[s]://]HOST[:PORT][,...] (default port 2379)"));
  };
  absl::ConsumePrefix(&ep, "http://") || absl::ConsumePrefix(&ep, "https://");
  absl::ConsumeSuffix(&ep, "/");
  if (absl::StrContains(ep, "://")) return invalid("unsupported scheme");
  absl::string_view host = ep;
  absl::string_view port;
  if (absl::StartsWith(ep, "[")) {
    const size_t close = ep.find(']');
    if (close == absl::string_view::npos) return invalid("unclosed '['");
    host = ep.substr(1, close - 1);
    if (!IsIpLiteral(host)) return invalid("only an IPv6 address goes in []");
    absl::string_view rest = ep.substr(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) {
      return invalid("text after ']'");
    }
    if (!rest.empty()) port = rest;
  } else if (const size_t colon = ep.rfind(':');
             colon != absl::string_view::npos) {
    if (ep.find(':') != colon) {
      return invalid("more than one ':' (bracket an IPv6 address)");
    }
    host = ep.substr(0, colon);
    port = ep.substr(colon + 1);
    if (port.empty()) return invalid("empty port");
  }
  if (absl::Status s = CheckHostName(host, "--rdzv-endpoint host"); !s.ok()) {
    return s;
  }
  int number = 2379;
  if (!port.empty()) {
    const bool digits =
        port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
    if (!digits || !absl::SimpleAtoi(port, &number) || number < 1 ||
        number > 65535) {
      return invalid("the port must be 1..65535");
    }
  }
  if (absl::StrContains(host, ':'))
    return absl::StrCat("[", host, "]:", number);
  return absl::StrCat(host, ":", number);
}

}  // namespace

absl::StatusOr<EtcdStoreOptions> ParseEtcdOptions(const std::string& endpoints,
                                                  const std::string& conf,
                                                  const std::string& run_id) {
  EtcdStoreOptions o;
  o.run_id = run_id;
  for (absl::string_view ep :
       absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
    auto normalized = NormalizeEndpoint(absl::StripAsciiWhitespace(ep));
    if (!normalized.ok()) return normalized.status();
    o.endpoints.push_back(*std::move(normalized));
  }
  for (absl::string_view item :
       absl::StrSplit(conf, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string key(absl::StripAsciiWhitespace(kv.first));
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    auto seconds = [&](absl::Duration* out) -> absl::Status {
      double s;
      // The cap matches the other --rdzv-conf durations (365 days).
      if (!absl::SimpleAtod(value, &s) || !std::isfinite(s) || s <= 0 ||
          s > 365.0 * 24 * 3600) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--rdzv-conf ", key, "=", QuoteForMessage(value),
            ": expected a positive, finite number of seconds (at most 365 "
            "days)"));
      }
      *out = absl::Seconds(s);
      return absl::OkStatus();
    };
    if (key == "etcd_prefix") {
      if (value.empty() || value[0] != '/') {
        return absl::InvalidArgumentError(
            absl::StrCat("--rdzv-conf etcd_prefix=", value,
                         ": expected an absolute key prefix like /distjob"));
      }
      o.prefix = value;
    } else if (key == "ca_cert") {
      o.ca_cert = value;
    } else if (key == "cert") {
      o.cert = value;
    } else if (key == "key") {
      o.key = value;
    } else if (key == "read_timeout") {
      if (auto s = seconds(&o.rpc_timeout); !s.ok()) return s;
    } else if (key == "etcd_session_ttl") {
      if (auto s = seconds(&o.session_ttl); !s.ok()) return s;
    }
  }
  if (o.cert.empty() != o.key.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-conf cert and key go together (client certificate and its "
        "private key)");
  }
  if (o.endpoints.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv-endpoint is empty; the etcd backend needs "
        "[http[s]://]HOST[:PORT][,...] (default port 2379)");
  }
  while (absl::EndsWith(o.prefix, "/") && o.prefix.size() > 1) {
    o.prefix.pop_back();
  }
  return o;
}

}  // namespace distjob
