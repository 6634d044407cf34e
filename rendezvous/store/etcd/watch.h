// etcd watches for the store's blocking reads: one watch stream of one or
// more key ranges, at one member after another until one answers.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_WATCH_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_WATCH_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/store/etcd/calls.h"
#include "rendezvous/store/etcd/members.h"

namespace distjob::etcd {

class Watcher {
 public:
  // (key, range end) pairs.
  using Ranges = std::vector<std::pair<std::string, std::string>>;

  // Both outlive this.
  Watcher(Members* members, InFlightCalls* calls)
      : members_(members), calls_(calls) {}

  // A Watch that answers when anything in one of `ranges` changes after
  // `after_revision`, or {false, revision} at `timeout` or the caller's
  // deadline (ScopedCallDeadline), whichever is first: one watcher per
  // range on one stream. Unavailable, naming the cluster, when the last
  // member tried failed (a transport error since any member last
  // answered): "no change" from a cluster no one could reach kept the
  // rendezvous monitor from ever seeing etcd lost. A stream that the
  // deadline ended before etcd answered it is no sign of either.
  absl::StatusOr<std::pair<bool, int64_t>> Watch(const Ranges& ranges,
                                                 int64_t after_revision,
                                                 absl::Duration timeout);

 private:
  struct Attempt {
    bool answered = false;  // etcd answered a create request
    bool changed = false;
    grpc::Status status;  // how the stream ended
  };

  // One watch stream at member `i`, until a change under `ranges` after
  // `after_revision` or `deadline`. False when the store was closed.
  bool WatchOnce(size_t i, const Ranges& ranges, int64_t after_revision,
                 absl::Time deadline, int64_t* revision, Attempt* out);

  Members* const members_;
  InFlightCalls* const calls_;
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_WATCH_H_
