// Lease renewals (KeepAlive) as messages on one long-lived LeaseKeepAlive
// stream per client, written by one thread and read by another: a stream
// per renewal cost etcd a stream's set-up and tear-down per node
// heartbeat, and 4,096 simulated nodes did not close a round within 45 s
// (bench/run.py, etcd). A broken stream fails the renewals it carried
// (their callers retry on a fresh one, at the next member); a stream that
// leaves a renewal unanswered for a whole attempt is taken for dead and
// replaced.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_KEEPALIVE_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_KEEPALIVE_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/calls.h"
#include "rendezvous/store/etcd/members.h"

namespace distjob::etcd {

class KeepAliveStream {
 public:
  // `members` and `calls` outlive this.
  KeepAliveStream(Members* members, InFlightCalls* calls)
      : members_(members), calls_(calls) {}
  ~KeepAliveStream() { Stop(); }

  // One keep-alive of lease `id`, within read_timeout; false when etcd no
  // longer knows the lease.
  absl::StatusOr<bool> KeepAlive(int64_t id);
  // Fails the renewals waiting and those to come, and ends the stream.
  void Stop();

 private:
  struct Renewal {
    int64_t id = 0;
    bool done = false;
    bool alive = false;
    grpc::Status failed;  // done, unanswered: the stream broke
  };
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<
        grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                 etcdserverpb::LeaseKeepAliveResponse>>
        stream;
    size_t member = 0;
    std::thread reader;
    bool broken = false;  // guarded by mu_
  };

  // A bound on renewals queued at once (a client shared by thousands of
  // simulated nodes queues one per node heartbeat).
  static constexpr size_t kMaxQueuedRenewals = 1 << 16;
  // Renewals of one lease written and not answered.
  static constexpr size_t kMaxUnansweredRenewals = 64;

  // Withdraws `r`, whose caller gave up at its deadline, and judges the
  // stream by it.
  void WithdrawLocked(Renewal* r, bool whole_attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the renewals written to a stream that broke; with `queued`, the
  // ones not written yet too (no stream, or the client closes).
  void FailRenewalsLocked(const grpc::Status& why, bool queued = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadRenewals(Stream* s);
  // Ends `s`: cancels it, waits for its reader, and notes how it ended
  // against its member (a failure moves the client to the next member).
  void EndStream(std::unique_ptr<Stream> s);
  std::unique_ptr<Stream> OpenStream();
  void WriteRenewals();
  // Writes the queued renewals to `s` (opened here when null).
  void WriteBatchLocked(std::unique_ptr<Stream>* s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Members* const members_;
  InFlightCalls* const calls_;
  absl::Mutex mu_;
  // Renewals not yet written, and those written awaiting their answer (by
  // lease, in the order written: etcd answers a stream's renewals in turn;
  // nullptr: one written whose caller gave up, so that its late answer is
  // not taken for the next renewal's, sent after it).
  std::deque<Renewal*> queue_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<int64_t, std::deque<Renewal*>> waiting_
      ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool replace_ ABSL_GUARDED_BY(mu_) = false;
  // When the stream last answered (or was opened).
  absl::Time answered_ ABSL_GUARDED_BY(mu_);
  std::thread writer_ ABSL_GUARDED_BY(mu_);  // started by the first renewal
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_KEEPALIVE_H_
