#include "rendezvous/store/etcd/testing.h"

#include <utility>

namespace distjob {

absl::StatusOr<std::unique_ptr<EtcdStore>> EtcdStoreTesting::Connect(
    EtcdStoreOptions options, etcd::Hooks hooks) {
  return EtcdStore::ConnectWithHooks(std::move(options), std::move(hooks));
}

}  // namespace distjob
