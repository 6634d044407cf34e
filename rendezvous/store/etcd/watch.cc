#include "rendezvous/store/etcd/watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "rendezvous/store/store_interface.h"

namespace distjob::etcd {

absl::StatusOr<std::pair<bool, int64_t>> Watcher::Watch(
    const Ranges& ranges, int64_t after_revision, absl::Duration timeout) {
  if (ScopedCallDeadline::Current() <= absl::Now()) {
    return absl::DeadlineExceededError(
        absl::StrCat("etcd watch at ", members_->Endpoints(),
                     ": the caller's deadline passed before it began"));
  }
  const absl::Time deadline =
      std::min(absl::Now() + timeout, ScopedCallDeadline::Current());
  int64_t revision = after_revision;
  grpc::Status failed;  // OK: none since a member last answered
  for (size_t attempt = 1; absl::Now() < deadline; ++attempt) {
    const size_t i = members_->Current();
    Attempt a;
    if (!WatchOnce(i, ranges, after_revision, deadline, &revision, &a)) {
      return absl::CancelledError("etcd watch: the store was closed");
    }
    members_->NoteResult(i, a.changed || !Retryable(a.status));
    if (a.changed) return std::make_pair(true, revision);
    if (a.answered) failed = grpc::Status::OK;
    // Cancelled: by this call's own deadline, or by Close (the next
    // attempt says so).
    if (a.status.error_code() != grpc::StatusCode::CANCELLED) {
      if (!Retryable(a.status)) return FromGrpcStatus(a.status);
      failed = a.status;
    }
    if (absl::Now() >= deadline) break;
    DJ_LOG_DEBUG("etcd watch at {}: {}", members_->EndpointOf(i),
                 a.status.error_message());
    members_->MovePast(i);
    if (attempt % members_->size() == 0) {
      absl::SleepFor(std::min(absl::Milliseconds(200), deadline - absl::Now()));
    }
  }
  if (!failed.ok()) {
    return absl::UnavailableError(
        absl::StrCat("etcd cluster ", members_->Endpoints(),
                     " unreachable for watch: ", failed.error_message()));
  }
  return std::make_pair(false, revision);
}

bool Watcher::WatchOnce(size_t i, const Ranges& ranges, int64_t after_revision,
                        absl::Time deadline, int64_t* revision, Attempt* out) {
  grpc::ClientContext ctx;
  // The stream ends at `deadline` by gRPC's deadline: no thread of its own
  // per watch call to cancel it then.
  ctx.set_deadline(absl::ToChronoTime(deadline));
  auto stubs = members_->StubsOf(i);
  if (!calls_->Register(&ctx)) return false;
  if (stubs->watch == nullptr) {
    calls_->Unregister(&ctx);
    out->status = stubs->unresolved;
    return true;
  }
  auto stream = stubs->watch->Watch(&ctx);
  bool written = true;
  for (const auto& [key, end] : ranges) {
    etcdserverpb::WatchRequest req;
    auto* create = req.mutable_create_request();
    create->set_key(key);
    create->set_range_end(end);
    create->set_start_revision(after_revision + 1);
    written = written && stream->Write(req);
  }
  etcdserverpb::WatchResponse resp;
  while (written && !out->changed && stream->Read(&resp)) {
    out->answered = true;
    *revision = std::max(*revision, resp.header().revision());
    if (resp.events_size() > 0 || resp.compact_revision() > 0 ||
        resp.canceled()) {
      out->changed = true;
      for (const auto& e : resp.events()) {
        *revision = std::max(*revision, e.kv().mod_revision());
      }
    }
  }
  ctx.TryCancel();
  out->status = stream->Finish();
  // The stream's only deadline is this call's own: ended by it, as by a
  // cancel, says nothing of the member's health (Watch).
  if (out->status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    out->status =
        grpc::Status(grpc::StatusCode::CANCELLED, out->status.error_message());
  }
  calls_->Unregister(&ctx);
  return true;
}

}  // namespace distjob::etcd
