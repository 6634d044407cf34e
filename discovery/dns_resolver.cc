#include "discovery/dns_resolver.h"

#include <ares.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/ares_poll.h"
#include "common/backoff.h"
#include "common/logging.h"

namespace distjob {
namespace {

struct Query {
  std::string name;
  std::vector<std::string> addresses;
  bool done = false;
};

void OnAddrinfo(void* arg, int status, int /*timeouts*/,
                ares_addrinfo* result) {
  auto* query = static_cast<Query*>(arg);
  query->done = true;
  if (status != ARES_SUCCESS || result == nullptr) {
    if (result != nullptr) ares_freeaddrinfo(result);
    return;
  }
  for (ares_addrinfo_node* node = result->nodes; node != nullptr;
       node = node->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr = nullptr;
    if (node->ai_family == AF_INET) {
      addr = &reinterpret_cast<sockaddr_in*>(node->ai_addr)->sin_addr;
    } else if (node->ai_family == AF_INET6) {
      addr = &reinterpret_cast<sockaddr_in6*>(node->ai_addr)->sin6_addr;
    }
    if (addr != nullptr &&
        inet_ntop(node->ai_family, addr, buf, sizeof(buf)) != nullptr) {
      query->addresses.emplace_back(buf);
    }
  }
  ares_freeaddrinfo(result);
}

absl::Status LibraryInit() {
  static const int rc = ares_library_init(ARES_LIB_INIT_ALL);
  if (rc != ARES_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("c-ares initialisation failed: ", ares_strerror(rc)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host[0] != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<Addresses> ResolveOnce(const std::vector<std::string>& names,
                                      const DnsOptions& options) {
  if (absl::Status s = LibraryInit(); !s.ok()) return s;
  ares_options opts{};
  int mask = ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
  opts.timeout = static_cast<int>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options.query_timeout)));
  opts.tries = 1;
  char lookups_dns_only[] = "b";
  if (!options.servers.empty()) {
    opts.lookups = lookups_dns_only;
    mask |= ARES_OPT_LOOKUPS;
  }
  ares_channel channel = nullptr;
  if (int rc = ares_init_options(&channel, &opts, mask); rc != ARES_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("cannot set up DNS resolution: ", ares_strerror(rc)));
  }
  if (!options.servers.empty()) {
    const std::string csv = absl::StrJoin(options.servers, ",");
    if (int rc = ares_set_servers_ports_csv(channel, csv.c_str());
        rc != ARES_SUCCESS) {
      ares_destroy(channel);
      return absl::InvalidArgumentError(
          absl::StrCat("--dns-server '", csv,
                       "' is not IP[:PORT][,...]: ", ares_strerror(rc)));
    }
  }
  std::vector<Query> queries(names.size());
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;  // A and AAAA
  hints.ai_socktype = SOCK_STREAM;
  for (size_t i = 0; i < names.size(); ++i) {
    queries[i].name = names[i];
    ares_getaddrinfo(channel, names[i].c_str(), nullptr, &hints, OnAddrinfo,
                     &queries[i]);
  }
  // A stop signal ends a pass too: a query to a server that does not
  // answer holds it query_timeout.
  PollAres(channel, absl::InfiniteFuture(), options.cancelled);
  ares_destroy(channel);  // completes any query still pending
  Addresses out;
  for (Query& q : queries) out[q.name] = std::move(q.addresses);
  return out;
}

absl::StatusOr<Addresses> WaitForNames(const std::vector<std::string>& names,
                                       const DnsOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  // Jittered, so a job's pods starting together do not query in step.
  Backoff backoff(options.initial_backoff, options.max_backoff);
  Addresses resolved;
  std::vector<std::string> missing = names;
  auto stopped = [&] {
    return absl::CancelledError(absl::StrCat(
        "stopped while waiting for the peers' DNS names (", missing.size(), "/",
        names.size(), " not resolved: ", absl::StrJoin(missing, ", "), ")"));
  };
  for (;;) {
    auto pass = ResolveOnce(missing, options);
    if (!pass.ok()) return pass.status();
    std::vector<std::string> still;
    for (auto& [name, addresses] : *pass) {
      if (addresses.empty()) {
        still.push_back(name);
      } else {
        resolved[name] = std::move(addresses);
      }
    }
    missing = std::move(still);
    if (missing.empty()) return resolved;
    if (options.cancelled && options.cancelled()) return stopped();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "peers not in DNS after ", absl::FormatDuration(options.timeout),
          ": ", absl::StrJoin(missing, ", ")));
    }
    DJ_LOG_INFO("waiting for {}/{} peers: {}", missing.size(), names.size(),
                absl::StrJoin(missing, ", "));
    const absl::Time wake = std::min(absl::Now() + backoff.Next(), deadline);
    while (absl::Now() < wake) {
      if (options.cancelled && options.cancelled()) {
        return stopped();
      }
      absl::SleepFor(std::min(absl::Milliseconds(100), wake - absl::Now()));
    }
  }
}

}  // namespace distjob
