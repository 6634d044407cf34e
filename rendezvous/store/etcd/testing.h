// Test-only: an EtcdStore with seams injected (hooks.h). Its library is
// testonly, so no production target can reach these seams.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_TESTING_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_TESTING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "rendezvous/store/etcd/hooks.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/etcd/store.h"

namespace distjob {

class EtcdStoreTesting {
 public:
  // EtcdStore::Connect, with `hooks` on its channels and job lease.
  static absl::StatusOr<std::unique_ptr<EtcdStore>> Connect(
      EtcdStoreOptions options, etcd::Hooks hooks);
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_TESTING_H_
