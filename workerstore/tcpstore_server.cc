#include "workerstore/tcpstore_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/busy_poll.h"
#include "common/fd_budget.h"
#include "common/heap_trim.h"
#include "common/listen.h"
#include "common/log_rate_limiter.h"
#include "common/logging.h"
#include "workerstore/allowed_peers.h"
#include "workerstore/peer_budgets.h"
#include "workerstore/tcpstore_conn.h"
#include "workerstore/tcpstore_data.h"
#include "workerstore/tcpstore_protocol.h"
#include "workerstore/tcpstore_server_impl.h"
#include "workerstore/tcpstore_sizing.h"
#include "workerstore/tcpstore_socket.h"
#include "workerstore/tcpstore_waits.h"

namespace distjob {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
// Freed memory is handed back to the kernel after this much, at most once
// a second (HeapTrimPacer).
constexpr size_t kTrimAfterBytes = size_t{8} << 20;
// One connection's reads per readiness event, so a fast sender cannot
// starve the others.
constexpr size_t kMaxReadPerEvent = 1 << 20;

// The caps the server keeps: max_connections raised to the job's
// expected connections, then cut to what the open-file limit holds after
// the other servers' need (one descriptor a connection: past it, accept()
// fails for the whole agent, not only for this store), then the caps a
// connection multiplies grown for the connections left past the caller's
// own cap: for what the limit lets in, not for what the job declared.
TcpStoreServerOptions Sized(TcpStoreServerOptions o) {
  const size_t own = o.max_connections;
  o.max_connections = std::max(o.max_connections, o.expected_connections);
  FitConnections(FdUser::kWorkerStore, 1, "tcpstore: max_connections",
                 &o.max_connections, &o.max_connections_per_peer);
  if (o.max_connections > own) {
    GrowForConnections(o.max_connections - own, &o.max_buffered_bytes,
                       &o.limits);
    DJ_LOG_INFO(
        "tcpstore: caps grown for {} connections (the job's declared "
        "size): max_waiters={} max_waiter_bytes={} max_buffered_bytes={}",
        o.max_connections, o.limits.max_waiters, o.limits.max_waiter_bytes,
        o.max_buffered_bytes);
  }
  return o;
}

}  // namespace

TcpStoreServer::Impl::Impl(const TcpStoreServerOptions& o)
    : options_(Sized(o)),
      budgets_(PeerBudgets::Shared(
          options_.max_connections, options_.max_connections_per_peer,
          options_.limits.max_waiters, options_.limits.max_waiter_bytes)),
      trim_(kTrimAfterBytes, absl::Seconds(1)),
      data_(options_.limits.max_total_bytes) {
  parse_limits_.max_key_bytes = o.limits.max_key_bytes;
  parse_limits_.max_value_bytes = o.limits.max_value_bytes;
  parse_limits_.max_keys_per_request = o.limits.max_keys_per_request;
  parse_limits_.max_frame_bytes = o.max_frame_bytes;
}

TcpStoreServer::Impl::~Impl() {
  Shutdown();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

absl::Status TcpStoreServer::Impl::Listen() {
  // A rank that starts late finds room in the backlog (4,096: a round's
  // ranks connect at once).
  absl::StatusOr<int> fd = ListenTcp(options_.host, options_.port, 4096);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("tcpstore: ", fd.status().message()));
  }
  listen_fd_ = *fd;
  port_ = BoundPort(listen_fd_);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (wake_fd_ < 0 || epoll_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("tcpstore: epoll: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return absl::OkStatus();
}

void TcpStoreServer::Impl::Loop() {
  epoll_event events[256];
  BusyPoll poll(options_.busy_poll);
  int unanswered_batches = 0;
  while (!stop_.load()) {
    const bool paused = unanswered_batches >= 2 &&
                        options_.set_stream_pause > absl::ZeroDuration();
    if (paused) {
      stream_pauses_.fetch_add(1, std::memory_order_relaxed);
      absl::SleepFor(options_.set_stream_pause);
      poll.Idle();  // the busy-poll window runs from the pause's end
    }
    answered_ = streamed_ = false;
    const bool polling = paused || poll.ShouldPoll();
    const int n = epoll_wait(epoll_fd_, events, 256, polling ? 0 : 1000);
    if (n > 0) {
      if (!polling) sleeps_.fetch_add(1, std::memory_order_relaxed);
      poll.GotWork();
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenerId) {
        Accept();
        continue;
      }
      if (id == kWakeId) {
        // Drained: Clear() wakes the loop more than once in its life.
        uint64_t count;
        ssize_t ignored = read(wake_fd_, &count, sizeof(count));
        (void)ignored;
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      if (events[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
        OnWritable(c);
        if (conns_.find(id) == conns_.end()) continue;
      }
      if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) OnReadable(c);
      auto still = conns_.find(id);
      if (still != conns_.end()) Account(*still->second);
      ShedBuffers();
    }
    if (accept_pending_ && !accept_paused_) Accept();
    ClearIfAsked();
    warnings_.TellOverdue();
    if (trim_.Due(absl::Now())) TrimHeap();
    // The loop wakes at least once a second (epoll_wait's timeout above).
    if (accept_paused_ &&
        std::chrono::steady_clock::now() - accept_paused_at_ >=
            std::chrono::seconds(1)) {
      ResumeAccept();
    }
    // Answers to other connections (wake-ups) go out once per batch.
    std::vector<uint64_t> dirty;
    dirty.swap(dirty_);
    for (uint64_t id : dirty) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      it->second->dirty = false;
      Flush(*it->second);
      Account(*it->second);
    }
    ShedBuffers();
    if (n > 0) poll.Idle();
    // The stream stopped (nothing came) or someone was answered: no pause.
    // A batch of neither (accepts, a validation, a wake-up) leaves it be.
    if (n <= 0 || answered_) {
      unanswered_batches = 0;
    } else if (streamed_) {
      ++unanswered_batches;
    }
  }
  CloseAllConns();
}

size_t TcpStoreServer::Impl::CloseAllConns() {
  std::vector<uint64_t> ids;
  for (const auto& [id, conn] : conns_) ids.push_back(id);
  for (uint64_t id : ids) CloseConn(id, "", false);
  return ids.size();
}

void TcpStoreServer::Impl::ClearIfAsked() {
  absl::MutexLock lock(&clear_mu_);
  if (clear_done_ == clear_requested_) return;
  data_.Clear();
  // Every connection open now is the last group's: its workers have exited
  // or, on a node the round left out, may still run. Closed, neither the
  // bytes a dead worker left unread nor a live stale worker's next request
  // reach the new group's keys, and with an admission list the stale
  // worker cannot come back.
  if (const size_t closed = CloseAllConns(); closed > 0) {
    DJ_LOG_INFO(
        "tcpstore: cleared for a new group; closed {} connection(s) "
        "of the last",
        closed);
  }
  clear_done_ = clear_requested_;
}

void TcpStoreServer::Impl::ResumeAccept() {
  if (!accept_paused_) return;
  accept_paused_ = false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
}

void TcpStoreServer::Impl::Accept() {
  accept_pending_ = false;
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // The listener would stay readable and spin the loop: stop
        // accepting until a connection closes, or for a second (the
        // descriptors may be the rest of the agent's).
        DJ_LOG_WARNING(
            "tcpstore: accept: {}; accepting again once a client leaves, or "
            "in a second",
            std::strerror(errno));
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_ = true;
        accept_paused_at_ = std::chrono::steady_clock::now();
        accept_pauses_.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    std::string ip = NormalizeAddress(ss);
    std::string peer = PeerName(ss, ip);
    std::string refusal;
    if (!allowed_.Admits(ip)) refusal = "not an allowed peer";
    if (refusal.empty() &&
        buffered_ + kConnBytes > options_.max_buffered_bytes) {
      refusal = absl::StrCat("max_buffered_bytes ", options_.max_buffered_bytes,
                             " reached");
    }
    while (refusal.empty()) {
      PeerBudgets::Verdict v = budgets_.AdmitConnection(ip);
      if (v.kind == PeerBudgets::Verdict::kAdmit) break;
      if (v.kind == PeerBudgets::Verdict::kRefuse) {
        refusal = std::move(v.reason);
        break;
      }
      Evict(v);
    }
    if (!refusal.empty()) {
      // Rate-limited: a peer that reconnects in a loop does not flood the
      // log.
      Warn(LogRateLimiter::Shape("refused: " + refusal),
           absl::StrCat("refused ", peer, ": ", refusal));
      refused_.fetch_add(1, std::memory_order_relaxed);
      close(fd);
      continue;
    }
    const int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    auto c = std::make_unique<Conn>();
    c->id = next_conn_id_++;
    c->fd = fd;
    c->ip = std::move(ip);
    c->peer = std::move(peer);
    budgets_.AddConnection(c->ip, c->id);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c->id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    Conn& added = *conns_.emplace(c->id, std::move(c)).first->second;
    Account(added);
    clients_.store(static_cast<int64_t>(conns_.size()),
                   std::memory_order_relaxed);
  }
  accept_pending_ = true;
}

void TcpStoreServer::Impl::OnReadable(Conn& c) {
  const uint64_t id = c.id;
  c.LendInput(&read_buffer_);
  size_t got = 0;
  while (got < kMaxReadPerEvent) {
    const size_t space = c.ReadRoom(options_.max_frame_bytes);
    const ssize_t n = read(c.fd, &c.in[c.in_len], space);
    if (n == 0) {
      // What was received before the close is still served (a client may
      // send a request and close), then the connection goes.
      if (!Serve(c)) return;
      const bool partial = c.in_len > c.in_off;
      CloseConn(id,
                partial ? "closed by the peer in the middle of a request" : "",
                partial);
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CloseConn(id, absl::StrCat("read: ", std::strerror(errno)), false);
      return;
    }
    c.in_len += static_cast<size_t>(n);
    got += static_cast<size_t>(n);
    if (c.in_len - c.in_off >= c.need && !Serve(c)) return;
    // A short read drained the socket (epoll, level-triggered, reports
    // more): no second read just to learn EAGAIN, a system call per
    // request saved.
    if (!c.reading || static_cast<size_t>(n) < space) break;
  }
  Flush(c);
  trim_.Released(c.ReturnInput(&read_buffer_));
}

bool TcpStoreServer::Impl::Serve(Conn& c) {
  while (c.in_len - c.in_off >= c.need) {
    if (c.PendingOutput() > options_.max_pending_output_bytes) {
      // The client does not read its answers: stop reading its requests
      // until it does (OnWritable resumes).
      c.reading = false;
      UpdateEvents(c);
      return true;
    }
    absl::string_view data(c.in.data() + c.in_off, c.in_len - c.in_off);
    if (c.dialect == tcpstore::Dialect::kUnknown) {
      c.dialect = tcpstore::DetectDialect(data);
      if (c.dialect == tcpstore::Dialect::kUnknown) {
        c.need = c.in_len - c.in_off + 1;
        return true;
      }
    }
    const tcpstore::ParseResult r =
        tcpstore::Parse(c.dialect, data, parse_limits_, &request_);
    if (r.kind == tcpstore::ParseResult::kNeedMore) {
      c.need = r.bytes;
      return true;
    }
    if (r.kind == tcpstore::ParseResult::kError) {
      CloseConn(c.id, r.error, true);
      return false;
    }
    c.need = 1;
    c.dialect = tcpstore::Refine(c.dialect, request_.op);
    requests_[static_cast<size_t>(request_.op)].fetch_add(
        1, std::memory_order_relaxed);
    if (!Execute(c, request_)) {
      CloseConn(c.id, "", true);
      return false;
    }
    c.in_off += r.bytes;
  }
  return true;
}

void TcpStoreServer::Impl::Flush(Conn& c) {
  if (c.PendingOutput() > 0) answered_ = true;
  trim_.Released(c.Send());
  UpdateEvents(c);
}

void TcpStoreServer::Impl::Account(Conn& c) {
  // Everything the connection holds counts, idle or not: an idle one holds
  // its bookkeeping and at most kIdleBufferBytes (ReturnInput, Flush).
  const size_t now = c.Holds();
  buffered_ = buffered_ - c.accounted + now;
  c.accounted = now;
  buffered_bytes_.store(static_cast<int64_t>(buffered_),
                        std::memory_order_relaxed);
}

void TcpStoreServer::Impl::ShedBuffers() {
  while (buffered_ > options_.max_buffered_bytes && !conns_.empty()) {
    auto largest = std::max_element(
        conns_.begin(), conns_.end(), [](const auto& a, const auto& b) {
          return a.second->accounted < b.second->accounted;
        });
    Warn("max_buffered_bytes",
         absl::StrCat("closing ", largest->second->peer, ": holds ",
                      largest->second->accounted,
                      " bytes of buffers, the most while all "
                      "connections' are over max_buffered_bytes ",
                      options_.max_buffered_bytes));
    protocol_errors_.fetch_add(1, std::memory_order_relaxed);
    CloseConn(largest->first, "", false);
  }
}

void TcpStoreServer::Impl::OnWritable(Conn& c) {
  Flush(c);
  if (!c.reading &&
      c.PendingOutput() <= options_.max_pending_output_bytes / 2) {
    c.reading = true;
    UpdateEvents(c);
    // Requests that arrived meanwhile are buffered already.
    if (!Serve(c)) return;
    Flush(c);
  }
}

void TcpStoreServer::Impl::UpdateEvents(Conn& c) {
  // A paused connection waits for writability even with nothing left to
  // send: OnWritable resumes its reading then.
  const uint32_t events = (c.reading ? EPOLLIN : EPOLLOUT) |
                          (c.PendingOutput() > 0 ? EPOLLOUT : 0u);
  // Most answers go out at once: no system call then.
  if (events == c.events) return;
  c.events = events;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void TcpStoreServer::Impl::CloseConn(uint64_t id, const std::string& reason,
                                     bool error) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (!reason.empty()) {
    Warn(LogRateLimiter::Shape(reason),
         absl::StrCat("closing ", c.peer, ": ", reason));
  }
  if (error && !reason.empty()) {
    protocol_errors_.fetch_add(1, std::memory_order_relaxed);
  }
  for (uint64_t wid : c.waits) DropWait(wid);
  buffered_ -= c.accounted;
  buffered_bytes_.store(static_cast<int64_t>(buffered_),
                        std::memory_order_relaxed);
  trim_.Released(c.accounted);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  close(c.fd);
  budgets_.RemoveConnection(c.ip, c.id);
  conns_.erase(it);
  ResumeAccept();
  clients_.store(static_cast<int64_t>(conns_.size()),
                 std::memory_order_relaxed);
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  // Before the first accept: a non-member must not slip in meanwhile.
  if (!options.allowed_peers.empty()) {
    impl->SetAllowedPeers(options.allowed_peers);
  }
  absl::Status s = impl->Listen();
  if (!s.ok()) return s;
  impl->StartLoop();
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

int TcpStoreServer::port() const { return impl_->port(); }
void TcpStoreServer::Shutdown() { impl_->Shutdown(); }
TcpStoreStats TcpStoreServer::Stats() { return impl_->Stats(); }
void TcpStoreServer::SetAllowedPeers(std::vector<std::string> ips) {
  impl_->SetAllowedPeers(ips);
}

absl::Status TcpStoreServer::Clear() { return impl_->Clear(); }

}  // namespace distjob
