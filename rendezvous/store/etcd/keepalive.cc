#include "rendezvous/store/etcd/keepalive.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backoff.h"
#include "common/logging.h"
#include "rendezvous/store/store_interface.h"

namespace distjob::etcd {

void KeepAliveStream::FailRenewalsLocked(const grpc::Status& why, bool queued) {
  for (auto& [id, waiters] : waiting_) {
    for (Renewal* r : waiters) {
      if (r == nullptr) continue;
      r->done = true;
      r->failed = why;
    }
  }
  waiting_.clear();
  if (!queued) return;
  for (Renewal* r : queue_) {
    r->done = true;
    r->failed = why;
  }
  queue_.clear();
}

void KeepAliveStream::ReadRenewals(Stream* s) {
  etcdserverpb::LeaseKeepAliveResponse resp;
  while (s->stream->Read(&resp)) {
    absl::MutexLock lock(&mu_);
    answered_ = absl::Now();
    auto it = waiting_.find(resp.id());
    if (it == waiting_.end()) continue;
    Renewal* r = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) waiting_.erase(it);
    if (r == nullptr) continue;  // its caller gave up
    r->done = true;
    r->alive = resp.ttl() > 0;
  }
  absl::MutexLock lock(&mu_);
  s->broken = true;
  FailRenewalsLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                  "etcd lease keep-alive stream ended"));
}

void KeepAliveStream::EndStream(std::unique_ptr<Stream> s) {
  if (s == nullptr) return;
  s->ctx.TryCancel();
  if (s->reader.joinable()) s->reader.join();
  const grpc::Status st = s->stream->Finish();
  calls_->Unregister(&s->ctx);
  bool failed;
  {
    absl::MutexLock lock(&mu_);
    failed = !stop_;
  }
  if (failed) {
    DJ_LOG_DEBUG("etcd lease keep-alive stream at {} ended: {}",
                 members_->EndpointOf(s->member), st.error_message());
    members_->NoteResult(s->member, false);
    members_->MovePast(s->member);
  }
}

std::unique_ptr<KeepAliveStream::Stream> KeepAliveStream::OpenStream() {
  const size_t i = members_->Current();
  auto stubs = members_->StubsOf(i);
  if (stubs->lease == nullptr) {
    members_->NoteResult(i, false);
    members_->MovePast(i);
    return nullptr;
  }
  auto s = std::make_unique<Stream>();
  s->member = i;
  if (!calls_->Register(&s->ctx)) return nullptr;
  s->stream = stubs->lease->LeaseKeepAlive(&s->ctx);
  Stream* raw = s.get();
  s->reader = std::thread([this, raw] { ReadRenewals(raw); });
  return s;
}

void KeepAliveStream::WriteRenewals() {
  std::unique_ptr<Stream> s;
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || replace_ || !queue_.empty() ||
             (s != nullptr && s->broken);
    };
    mu_.Await(absl::Condition(&ready));
    if (stop_ || replace_ || (s != nullptr && s->broken)) {
      replace_ = false;
      if (s != nullptr) {
        FailRenewalsLocked(
            grpc::Status(grpc::StatusCode::UNAVAILABLE,
                         "etcd lease keep-alive stream replaced"));
        mu_.Unlock();
        EndStream(std::move(s));
        mu_.Lock();
      }
      if (stop_) {
        FailRenewalsLocked(
            grpc::Status(grpc::StatusCode::CANCELLED, "etcd store closed"),
            true);
        return;
      }
      continue;
    }
    WriteBatchLocked(&s);
  }
}

void KeepAliveStream::WriteBatchLocked(std::unique_ptr<Stream>* stream) {
  std::unique_ptr<Stream>& s = *stream;
  if (s == nullptr) {
    mu_.Unlock();
    s = OpenStream();
    mu_.Lock();
    answered_ = absl::Now();
    if (s == nullptr) {
      FailRenewalsLocked(
          grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       absl::StrCat("etcd lease keep-alive: no stream to ",
                                    members_->EndpointOf(members_->Current()))),
          true);
      return;
    }
  }
  std::vector<Renewal*> batch(queue_.begin(), queue_.end());
  queue_.clear();
  std::vector<int64_t> ids;
  for (Renewal* r : batch) {
    waiting_[r->id].push_back(r);
    ids.push_back(r->id);
  }
  mu_.Unlock();
  bool wrote = true;
  for (size_t i = 0; i < ids.size() && wrote; ++i) {
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(ids[i]);
    grpc::WriteOptions options;
    // Coalesced: the batch goes out in as few frames as it can.
    if (i + 1 < ids.size()) options.set_buffer_hint();
    wrote = s->stream->Write(req, options);
  }
  mu_.Lock();
  if (!wrote) s->broken = true;
}

void KeepAliveStream::WithdrawLocked(Renewal* r, bool whole_attempt) {
  // Still queued or awaiting its answer: withdrawn.
  auto q = std::find(queue_.begin(), queue_.end(), r);
  if (q != queue_.end()) queue_.erase(q);
  auto it = waiting_.find(r->id);
  if (it != waiting_.end()) {
    // Written: its answer may still come, and is its own.
    auto w = std::find(it->second.begin(), it->second.end(), r);
    if (w != it->second.end()) *w = nullptr;
    // So many unanswered that the stream is taken for dead, whatever
    // the callers' deadlines: the slots go with it.
    if (it->second.size() > kMaxUnansweredRenewals) replace_ = true;
  }
  // A stream that answered nothing while a renewal waited a whole
  // attempt is taken for dead (a connection lost without a reset); one
  // that answers late is only slow (an overloaded etcd).
  if (whole_attempt && absl::Now() - answered_ >= members_->rpc_timeout()) {
    replace_ = true;
  }
}

absl::StatusOr<bool> KeepAliveStream::KeepAlive(int64_t id) {
  // read_timeout, as every other call: a renewal etcd does not answer
  // within it is the store lost (DynamicRendezvous::RenewLease), not a
  // wait of its own.
  const absl::Time start = absl::Now();
  const absl::Duration budget = members_->rpc_timeout();
  const absl::Time deadline =
      std::min(start + budget, ScopedCallDeadline::Current());
  const bool whole_attempt = deadline == start + budget;
  grpc::Status last;
  Backoff backoff(absl::Milliseconds(50), absl::Seconds(1));
  for (bool first = true; first || absl::Now() < deadline; first = false) {
    if (!first) {
      absl::SleepFor(std::min(backoff.Next(), deadline - absl::Now()));
    }
    Renewal r;
    r.id = id;
    absl::MutexLock lock(&mu_);
    if (stop_) {
      return absl::CancelledError(
          "etcd lease keep-alive: the store was closed");
    }
    if (queue_.size() >= kMaxQueuedRenewals) {
      return absl::UnavailableError(
          absl::StrCat("etcd lease keep-alive: ", queue_.size(),
                       " renewals queued already"));
    }
    if (!writer_.joinable()) writer_ = std::thread([this] { WriteRenewals(); });
    queue_.push_back(&r);
    if (!mu_.AwaitWithDeadline(absl::Condition(&r.done), deadline)) {
      WithdrawLocked(&r, whole_attempt);
      return absl::UnavailableError(absl::StrCat(
          "etcd cluster ", members_->Endpoints(),
          " unreachable for lease keep-alive: no answer before the deadline",
          last.ok() ? "" : absl::StrCat(" (", last.error_message(), ")")));
    }
    if (r.failed.ok()) return r.alive;
    last = r.failed;
    if (last.error_code() == grpc::StatusCode::CANCELLED) {
      return absl::CancelledError(
          "etcd lease keep-alive: the store was closed");
    }
  }
  return absl::UnavailableError(absl::StrCat(
      "etcd cluster ", members_->Endpoints(),
      " unreachable for lease keep-alive: ", last.error_message()));
}

void KeepAliveStream::Stop() {
  std::thread writer;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    writer = std::move(writer_);
  }
  if (writer.joinable()) writer.join();
}

}  // namespace distjob::etcd
