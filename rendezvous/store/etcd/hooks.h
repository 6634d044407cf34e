// Seams a test injects into the etcd client (EtcdStoreTesting, testing.h):
// a flaky transport, and a look at the job lease's adoption. The agent
// runs with none set; they are no options, as no user configures them.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_HOOKS_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_HOOKS_H_

#include <functional>
#include <memory>
#include <vector>

namespace grpc::experimental {
class ClientInterceptorFactoryInterface;
}  // namespace grpc::experimental

namespace distjob::etcd {

struct Hooks {
  // Interceptors on every channel to a member: a flaky transport.
  std::function<std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>()>
      interceptors;
  // Called as a call starts waiting for another call's adoption of the
  // job lease.
  std::function<void()> lease_wait;
  // Called as an adoption of the job lease has registered this client as
  // a holder, before it records its leases.
  std::function<void()> adopted;
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_HOOKS_H_
