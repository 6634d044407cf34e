// The etcd client's calls in flight, so that Close can cancel them: a
// leaving agent must not wait out a blocked watch. Once cancelled, only
// the closing thread may call (to revoke its leases), until Close ends.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_CALLS_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_CALLS_H_

#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace distjob::etcd {

class InFlightCalls {
 public:
  // False (and not registered) when the call is refused (Refused).
  bool Register(grpc::ClientContext* ctx);
  void Unregister(grpc::ClientContext* ctx);
  // Cancels every call registered; later ones are refused but the
  // calling thread's.
  void CancelAll();
  // Whether a call from this thread would be refused.
  bool Refused();
  // Close is over: later calls, from any thread, are refused.
  void EndClose();

 private:
  absl::Mutex mu_;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id closer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_CALLS_H_
