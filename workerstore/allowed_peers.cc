#include "workerstore/allowed_peers.h"

#include <utility>

#include "common/logging.h"
#include "workerstore/tcpstore_socket.h"

namespace distjob {

void AllowedPeers::Set(const std::vector<std::string>& ips) {
  std::set<std::string> allowed;
  for (const std::string& ip : ips) {
    std::string n = NormalizeText(ip);
    if (n.empty()) {
      DJ_LOG_WARNING("tcpstore: allowed peer '{}' is not a numeric address",
                     ip);
      continue;
    }
    allowed.insert(std::move(n));
  }
  absl::MutexLock lock(&mu_);
  allowed_ = std::move(allowed);
}

bool AllowedPeers::Admits(const std::string& ip) const {
  absl::MutexLock lock(&mu_);
  return allowed_.empty() || allowed_.count(ip) > 0;
}

}  // namespace distjob
