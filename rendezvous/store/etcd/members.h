// The etcd cluster's members as the client sees them: one channel each
// (through the agent's resolver), the member calls go to first, and the
// fail-over that moves past a member that is down or has lost quorum.
#ifndef DISTJOB_RENDEZVOUS_STORE_ETCD_MEMBERS_H_
#define DISTJOB_RENDEZVOUS_STORE_ETCD_MEMBERS_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/etcd/calls.h"
#include "rendezvous/store/etcd/hooks.h"

namespace distjob::etcd {

// A failure another member (or a later attempt) may not have.
bool Retryable(const grpc::Status& s);

struct Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  // No channel (the stubs are null) while the member's name does not
  // resolve: its calls fail with this, and after a few the name is
  // looked up again (NoteResult).
  grpc::Status unresolved;
};

class Members {
 public:
  // One RPC of a call, at one member, under `ctx`.
  using Rpc = std::function<grpc::Status(const Stubs&, grpc::ClientContext*)>;

  // `calls` and `hooks` outlive this.
  Members(const std::vector<std::string>& endpoints,
          std::shared_ptr<grpc::ChannelCredentials> creds,
          absl::Duration rpc_timeout, InFlightCalls* calls, const Hooks* hooks);

  // Runs `rpc` on one member after another until one answers or `budget`
  // is spent; a member that is down or has lost quorum is skipped.
  // `retried`, when given, is set on any attempt that failed in a way that
  // may still have applied it (a transport failure, retried or not).
  absl::Status Call(absl::string_view what, absl::Duration budget,
                    const Rpc& rpc, bool* retried = nullptr);

  // A transaction, within read_timeout (Call).
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(
      const etcdserverpb::TxnRequest& req, absl::string_view what,
      bool* retried = nullptr);

  // `limit`: at most this many keys (0: all), `more` in the answer when
  // the range holds more.
  // `revision`: as of that revision (0: now).
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    const std::string& end,
                                                    bool count_only = false,
                                                    int64_t limit = 0,
                                                    int64_t revision = 0);

  // The member calls go to first.
  size_t Current() const { return current_.load() % members_.size(); }
  size_t size() const { return members_.size(); }
  const std::string& EndpointOf(size_t i) const { return members_[i].endpoint; }
  // Every endpoint, comma-separated, for messages.
  std::string Endpoints() const;
  absl::Duration rpc_timeout() const { return rpc_timeout_; }

  std::shared_ptr<Stubs> StubsOf(size_t i);
  // Notes how a call at member `i` went: a channel that connected while
  // its member was starting up can stay broken after the member is up; a
  // fresh one after a few failures in a row recovers at once.
  void NoteResult(size_t i, bool ok);
  // Moves calls past member `i`, unless another call did already.
  void MovePast(size_t i);

 private:
  struct Member {
    std::string endpoint;
    std::shared_ptr<Stubs> stubs;  // guarded by mu_
    int failures = 0;              // guarded by mu_
  };

  std::shared_ptr<Stubs> NewStubs(const std::string& ep);

  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  const absl::Duration rpc_timeout_;
  InFlightCalls* const calls_;
  const Hooks* const hooks_;
  absl::Mutex mu_;
  std::vector<Member> members_;
  // Always below members_.size(), so that moving past a failed member
  // compares with the index it was read as.
  std::atomic<size_t> current_{0};
};

}  // namespace distjob::etcd

#endif  // DISTJOB_RENDEZVOUS_STORE_ETCD_MEMBERS_H_
