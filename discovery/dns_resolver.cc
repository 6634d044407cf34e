#include "discovery/dns_resolver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/backoff.h"
#include "common/logging.h"
#include "common/progress_log.h"

namespace distjob {

absl::StatusOr<Addresses> WaitForNames(const std::vector<std::string>& names,
                                       const DnsOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  // Jittered, so a job's pods starting together do not query in step.
  Backoff backoff(options.initial_backoff, options.max_backoff);
  Addresses resolved;
  std::vector<std::string> missing = names;
  std::vector<std::string> announced;  // as last logged
  ProgressLog progress;
  auto stopped = [&] {
    return absl::CancelledError(absl::StrCat(
        "stopped while waiting for the peers' DNS names (", missing.size(), "/",
        names.size(), " not resolved: ", absl::StrJoin(missing, ", "), ")"));
  };
  auto cancelled = [&] {
    return options.resolver.cancelled && options.resolver.cancelled();
  };
  for (;;) {
    ResolverOptions resolver = options.resolver;
    // A pass never outlasts the wait's own deadline (search domains make
    // one name several queries in a row).
    resolver.pass_timeout = std::clamp(
        deadline - absl::Now(), absl::Milliseconds(100), resolver.pass_timeout);
    auto pass = ResolveNames(missing, resolver);
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
    if (cancelled()) return stopped();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "peers not in DNS after ", absl::FormatDuration(options.timeout),
          ": ", absl::StrJoin(missing, ", ")));
    }
    // When who is missing changes, else once per progress interval: the
    // pause between passes is a few seconds at most.
    if (missing != announced || progress.Due()) {
      announced = missing;
      DJ_LOG_INFO(
          "waiting for {}/{} peers: {} (in DNS until {})", missing.size(),
          names.size(), absl::StrJoin(missing, ", "),
          absl::FormatTime("%H:%M:%S UTC", deadline, absl::UTCTimeZone()));
    }
    const absl::Time wake = std::min(absl::Now() + backoff.Next(), deadline);
    while (absl::Now() < wake) {
      if (cancelled()) return stopped();
      absl::SleepFor(std::min(absl::Milliseconds(100), wake - absl::Now()));
    }
  }
}

}  // namespace distjob
