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
#include "absl/container/flat_hash_set.h"
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
#include "workerstore/tcpstore_socket.h"
#include "workerstore/tcpstore_waits.h"

namespace distjob {
namespace {

using tcpstore::Op;

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
// Freed memory is handed back to the kernel after this much, at most once
// a second (HeapTrimPacer).
constexpr size_t kTrimAfterBytes = size_t{8} << 20;
// One connection's reads per readiness event, so a fast sender cannot
// starve the others.
constexpr size_t kMaxReadPerEvent = 1 << 20;

// The connection caps cut to what the open-file limit holds after the
// other servers' need (one descriptor a connection): past it, accept()
// fails for the whole agent, not only for this store.
TcpStoreServerOptions FitToFds(TcpStoreServerOptions o) {
  FitConnections(FdUser::kWorkerStore, 1, "tcpstore: max_connections",
                 &o.max_connections, &o.max_connections_per_peer);
  return o;
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  explicit Impl(const TcpStoreServerOptions& o)
      : options_(FitToFds(o)),
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
  ~Impl() {
    Shutdown();
    if (listen_fd_ >= 0) close(listen_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
  }

  absl::Status Listen();
  void StartLoop() {
    absl::MutexLock lock(&shutdown_mu_);
    thread_ = std::thread([this] { Loop(); });
    // Named for `top -H` and for the test that watches it sleep.
    pthread_setname_np(thread_.native_handle(), "tcpstore-loop");
  }
  int port() const { return port_; }
  void Shutdown() {
    absl::MutexLock lock(&shutdown_mu_);
    if (!thread_.joinable()) return;
    stop_.store(true);
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
    thread_.join();
    // A Clear() waiting on the loop is answered: there is nothing to clear.
    absl::MutexLock clear_lock(&clear_mu_);
    clear_done_ = clear_requested_;
  }
  TcpStoreStats Stats() {
    TcpStoreStats s;
    s.keys = data_.keys();
    s.bytes = data_.bytes();
    s.clients = clients_.load(std::memory_order_relaxed);
    s.parked_waits = parked_.load(std::memory_order_relaxed);
    s.protocol_errors = protocol_errors_.load(std::memory_order_relaxed);
    s.refused_connections = refused_.load(std::memory_order_relaxed);
    s.evictions = evictions_.load(std::memory_order_relaxed);
    s.buffered_bytes = buffered_bytes_.load(std::memory_order_relaxed);
    s.accept_pauses = accept_pauses_.load(std::memory_order_relaxed);
    s.sleeps = sleeps_.load(std::memory_order_relaxed);
    s.stream_pauses = stream_pauses_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < static_cast<size_t>(Op::kCount); ++i) {
      const int64_t n = requests_[i].load(std::memory_order_relaxed);
      if (n > 0) s.requests[tcpstore::OpName(static_cast<Op>(i))] = n;
    }
    return s;
  }
  absl::Status Clear() {
    {
      // Shutdown's join() writes thread_ under shutdown_mu_. Not held for
      // the wait below: Shutdown must be able to release it.
      absl::MutexLock lock(&shutdown_mu_);
      if (!thread_.joinable() || stop_.load()) return absl::OkStatus();
    }
    absl::MutexLock lock(&clear_mu_);
    const uint64_t wanted = ++clear_requested_;
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
    // The loop answers within one pass; Shutdown also releases the wait.
    auto done = [this, wanted]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(clear_mu_) {
      return clear_done_ >= wanted || stop_.load();
    };
    if (clear_mu_.AwaitWithTimeout(absl::Condition(&done),
                                   options_.clear_timeout)) {
      return absl::OkStatus();
    }
    // The loop will still clear when it comes to it, maybe after the
    // caller's next group has written its keys: the caller must not go on
    // to hand this store to a new group (TcpStoreServer::Clear).
    return absl::DeadlineExceededError(absl::StrCat(
        "the workers' TCPStore on port ", port_, " did not clear within ",
        absl::FormatDuration(options_.clear_timeout), ": its loop is busy"));
  }
  void SetAllowedPeers(const std::vector<std::string>& ips) {
    allowed_.Set(ips);
  }

 private:
  using Conn = TcpStoreConn;

  void Loop();
  void Accept();
  // Listens again after Accept() ran out of descriptors.
  void ResumeAccept();
  void OnReadable(Conn& c);
  void OnWritable(Conn& c);
  // Parses and serves what `c` has buffered; false when `c` was closed.
  bool Serve(Conn& c);
  // Serves one request; false when `c` must be closed (reason logged).
  bool Execute(Conn& c, const tcpstore::Request& r);
  // One handler per operation, as Execute: false when `c` must be closed.
  bool OnValidate(Conn& c, const tcpstore::Request& r);
  bool OnPing(Conn& c, const tcpstore::Request& r);
  bool OnSet(Conn& c, const tcpstore::Request& r);
  bool OnMultiSet(Conn& c, const tcpstore::Request& r);
  bool OnCompareSet(Conn& c, const tcpstore::Request& r);
  bool OnGet(Conn& c, const tcpstore::Request& r);
  bool OnMultiGet(Conn& c, const tcpstore::Request& r);
  bool OnAdd(Conn& c, const tcpstore::Request& r);
  bool OnAppend(Conn& c, const tcpstore::Request& r);
  bool OnCheck(Conn& c, const tcpstore::Request& r);
  bool OnWait(Conn& c, const tcpstore::Request& r);
  bool OnCancelWait(Conn& c, const tcpstore::Request& r);
  bool OnNumKeys(Conn& c, const tcpstore::Request& r);
  bool OnDeleteKey(Conn& c, const tcpstore::Request& r);
  bool OnQueuePush(Conn& c, const tcpstore::Request& r);
  bool OnQueuePop(Conn& c, const tcpstore::Request& r);
  bool OnQueueLen(Conn& c, const tcpstore::Request& r);
  bool OnListKeys(Conn& c, const tcpstore::Request& r);
  void Flush(Conn& c);
  // Counts c's buffers that hold something (their capacity) in buffered_.
  void Account(Conn& c);
  // While buffered_ is over max_buffered_bytes, closes the connection that
  // holds the most (logged). Called where no Conn& is held.
  void ShedBuffers();
  void UpdateEvents(Conn& c);
  void CloseConn(uint64_t id, const std::string& reason, bool error);
  // Closes every open connection quietly; returns how many.
  size_t CloseAllConns();
  // Sets `key` and answers the waits it completes.
  void Put(absl::string_view key, absl::string_view value);
  // Answers parked waits that `key` (now present) completes; `one`: a
  // queue item, for one popper (TcpStoreWaits::ArrivedOnce).
  void Wake(absl::string_view key, bool one = false);
  void Answer(const TcpStoreWaits::Woken& woken);
  void DropWait(uint64_t wait_id);
  void MarkDirty(Conn& c) {
    if (!c.dirty) {
      c.dirty = true;
      dirty_.push_back(c.id);
    }
  }
  bool Violation(Conn& c, const std::string& what) {
    Warn(LogRateLimiter::Shape(what),
         absl::StrCat("closing ", c.peer, ": ", what));
    protocol_errors_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // One warning line a second per kind of event (a message's shape: a
  // random-frame flood's reasons differ in their numbers only), with the
  // count of those held back.
  void Warn(absl::string_view kind, const std::string& line) {
    warnings_.Warn(kind, line);
  }
  // Parks a wait of `keys` for `c`, making room in a full budget at the
  // cost of the heaviest other address; false when `c` must be closed.
  bool ParkWait(Conn& c, std::vector<std::string> keys);
  // Closes the connection a full budget gives way with (v: kEvict).
  void Evict(const PeerBudgets::Verdict& v) {
    evictions_.fetch_add(1, std::memory_order_relaxed);
    auto victim = conns_.find(v.victim);
    Warn("eviction",
         absl::StrCat("closing ",
                      victim == conns_.end() ? "?" : victim->second->peer, ": ",
                      v.reason));
    CloseConn(v.victim, "", false);
  }
  // Whether `key` may hold a value of `size` bytes under max_total_bytes;
  // closes nothing itself.
  bool Room(Conn& c, absl::string_view key, size_t size) {
    if (data_.Fits(key, size)) return true;
    return Violation(
        c, absl::StrCat("max_total_bytes ", options_.limits.max_total_bytes,
                        " of keys and values reached"));
  }

  const TcpStoreServerOptions options_;
  tcpstore::ParseLimits parse_limits_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int epoll_fd_ = -1;
  int port_ = 0;
  absl::Mutex shutdown_mu_;
  std::thread thread_ ABSL_GUARDED_BY(shutdown_mu_);
  std::atomic<bool> stop_{false};

  AllowedPeers allowed_;

  // Clear(): asked by any thread, done by the loop.
  absl::Mutex clear_mu_;
  uint64_t clear_requested_ ABSL_GUARDED_BY(clear_mu_) = 0;
  uint64_t clear_done_ ABSL_GUARDED_BY(clear_mu_) = 0;
  void ClearIfAsked();
  // Whether `answer` more bytes keep `c`'s unsent output within
  // max_pending_output_bytes.
  bool AnswerFits(const Conn& c, size_t answer) const;

  // Loop thread only.
  uint64_t next_conn_id_ = 2;
  // Every connection's buffers that hold something, as last counted
  // (Account): bounded by max_buffered_bytes, plus what one connection's
  // event adds.
  size_t buffered_ = 0;
  bool accept_paused_ = false;  // out of file descriptors
  std::chrono::steady_clock::time_point accept_paused_at_;
  PeerBudgets budgets_;
  RateLimitedWarnings warnings_{"tcpstore"};
  HeapTrimPacer trim_;
  // Lent to the connection being read when it has nothing buffered, so
  // that idle connections hold no request buffer (TcpStoreConn::LendInput).
  std::string read_buffer_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<uint64_t> dirty_;
  TcpStoreData data_;
  uint64_t next_wait_id_ = 1;
  TcpStoreWaits waits_;
  tcpstore::Request request_;
  // A multi_get's values, found once while its answer is sized: each
  // look-up of a key is most of the CPU a gloo all-gather costs the server.
  std::vector<const TcpStoreValue*> found_;

  std::atomic<int64_t> clients_{0}, parked_{0};
  std::atomic<int64_t> protocol_errors_{0}, refused_{0}, sleeps_{0},
      stream_pauses_{0}, accept_pauses_{0}, evictions_{0}, buffered_bytes_{0};
  // Whether the loop's current batch sent anything (Flush), and whether it
  // served a set (which has no answer): a batch of sets that answered no
  // one is a stream's (Loop).
  bool answered_ = false;
  bool streamed_ = false;
  std::atomic<int64_t> requests_[static_cast<size_t>(Op::kCount) + 1] = {};
};

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

bool TcpStoreServer::Impl::Execute(Conn& c, const tcpstore::Request& r) {
  switch (r.op) {
    case Op::kValidate:
      return OnValidate(c, r);
    case Op::kPing:
      return OnPing(c, r);
    case Op::kSet:
      return OnSet(c, r);
    case Op::kMultiSet:
      return OnMultiSet(c, r);
    case Op::kCompareSet:
      return OnCompareSet(c, r);
    case Op::kGet:
      return OnGet(c, r);
    case Op::kMultiGet:
      return OnMultiGet(c, r);
    case Op::kAdd:
      return OnAdd(c, r);
    case Op::kAppend:
      return OnAppend(c, r);
    case Op::kCheck:
      return OnCheck(c, r);
    case Op::kWait:
      return OnWait(c, r);
    case Op::kCancelWait:
      return OnCancelWait(c, r);
    case Op::kNumKeys:
      return OnNumKeys(c, r);
    case Op::kDeleteKey:
      return OnDeleteKey(c, r);
    case Op::kQueuePush:
      return OnQueuePush(c, r);
    case Op::kQueuePop:
      return OnQueuePop(c, r);
    case Op::kQueueLen:
      return OnQueueLen(c, r);
    case Op::kListKeys:
      return OnListKeys(c, r);
    case Op::kWatchKey:
    case Op::kBarrier:
    case Op::kCount:
      break;
  }
  return Violation(c, absl::StrCat(tcpstore::OpName(r.op),
                                   " is not supported by this server"));
}

bool TcpStoreServer::Impl::OnValidate(Conn& c, const tcpstore::Request& r) {
  if (r.word != tcpstore::kValidateMagic) {
    return Violation(c, "validate: wrong magic number");
  }
  return true;
}

bool TcpStoreServer::Impl::OnPing(Conn& c, const tcpstore::Request& r) {
  tcpstore::AppendU32(&c.out, r.word);
  return true;
}

bool TcpStoreServer::Impl::OnSet(Conn& c, const tcpstore::Request& r) {
  if (!Room(c, r.keys[0], r.values[0].size())) return false;
  Put(r.keys[0], r.values[0]);
  streamed_ = true;
  return true;
}

bool TcpStoreServer::Impl::OnMultiSet(Conn& c, const tcpstore::Request& r) {
  streamed_ = true;
  for (size_t i = 0; i < r.keys.size(); ++i) {
    if (!Room(c, r.keys[i], r.values[i].size())) return false;
    Put(r.keys[i], r.values[i]);
  }
  return true;
}

bool TcpStoreServer::Impl::OnCompareSet(Conn& c, const tcpstore::Request& r) {
  const TcpStoreValue* current = data_.Find(r.keys[0]);
  const absl::string_view expected = r.values[0], desired = r.values[1];
  if (current == nullptr) {
    if (expected.empty()) {
      if (!Room(c, r.keys[0], desired.size())) return false;
      Put(r.keys[0], desired);
      tcpstore::AppendBytes(&c.out, desired);
    } else {
      // As TCPStore: the expected value comes back although the key
      // does not exist, which the caller reads as a failed swap.
      tcpstore::AppendBytes(&c.out, expected);
    }
    return true;
  }
  if (current->bytes() == expected) {
    if (!Room(c, r.keys[0], desired.size())) return false;
    Put(r.keys[0], desired);
  }
  tcpstore::AppendBytes(&c.out, data_.Find(r.keys[0])->bytes());
  return true;
}

bool TcpStoreServer::Impl::OnGet(Conn& c, const tcpstore::Request& r) {
  const TcpStoreValue* value = data_.Find(r.keys[0]);
  if (value == nullptr) {
    // TCPStore's get throws here and drops the connection; its clients
    // always wait for the key first, so the key was deleted in between.
    return Violation(c, "get of a key that does not exist");
  }
  c.AppendValue(*value);
  return true;
}

bool TcpStoreServer::Impl::OnMultiGet(Conn& c, const tcpstore::Request& r) {
  // A small request may name one large value many times: the answer is
  // sized before any of it is queued.
  size_t answer = 0;
  found_.clear();
  for (absl::string_view k : r.keys) {
    const TcpStoreValue* value = data_.Find(k);
    if (value == nullptr) {
      return Violation(c, "multi_get of a key that does not exist");
    }
    answer += sizeof(uint64_t) + value->size();
    found_.push_back(value);
  }
  if (!AnswerFits(c, answer)) {
    return Violation(c,
                     absl::StrCat("multi_get answer of ", answer,
                                  " bytes over max_pending_output_", "bytes ",
                                  options_.max_pending_output_bytes));
  }
  // Large values are sent from the store's own buffers (AppendValue).
  for (const TcpStoreValue* value : found_) c.AppendValue(*value);
  return true;
}

bool TcpStoreServer::Impl::OnAdd(Conn& c, const tcpstore::Request& r) {
  int64_t value = r.number;
  if (const TcpStoreValue* stored = data_.Find(r.keys[0])) {
    int64_t old;
    if (!tcpstore::ParseStoredInt(stored->bytes(), &old)) {
      return Violation(c, "add to a value that is not a decimal number");
    }
    if (__builtin_add_overflow(old, r.number, &value)) {
      return Violation(c, "add overflows int64");
    }
  }
  std::string text = std::to_string(value);
  if (!Room(c, r.keys[0], text.size())) return false;
  Put(r.keys[0], text);
  tcpstore::AppendI64(&c.out, value);
  return true;
}

bool TcpStoreServer::Impl::OnAppend(Conn& c, const tcpstore::Request& r) {
  const TcpStoreValue* stored = data_.Find(r.keys[0]);
  if (stored == nullptr) {
    if (!Room(c, r.keys[0], r.values[0].size())) return false;
    Put(r.keys[0], r.values[0]);
    return true;
  }
  const size_t max_value_bytes = options_.limits.max_value_bytes;
  std::string v;
  v.reserve(stored->size() + r.values[0].size());
  v.append(stored->bytes().data(), stored->size())
      .append(r.values[0].data(), r.values[0].size());
  if (v.size() > max_value_bytes) {
    return Violation(c, absl::StrCat("append makes a value over "
                                     "max_value_bytes ",
                                     max_value_bytes));
  }
  if (!Room(c, r.keys[0], v.size())) return false;
  Put(r.keys[0], v);
  return true;
}

bool TcpStoreServer::Impl::OnCheck(Conn& c, const tcpstore::Request& r) {
  bool all = true;
  for (absl::string_view k : r.keys) all = all && data_.Exists(k);
  tcpstore::AppendU8(&c.out, all ? tcpstore::kReady : tcpstore::kNotReady);
  return true;
}

bool TcpStoreServer::Impl::OnWait(Conn& c, const tcpstore::Request& r) {
  std::vector<absl::string_view> missing;
  for (absl::string_view k : r.keys) {
    if (!data_.Exists(k)) missing.push_back(k);
  }
  // A key named twice is waited for once, and held once. Sorted as views:
  // a gloo rank waits on 512 keys at once, and sorting their copies cost
  // more than the copies.
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  std::vector<std::string> keys(missing.begin(), missing.end());
  if (keys.empty()) {
    tcpstore::AppendU8(&c.out, tcpstore::kStopWaiting);
    return true;
  }
  const size_t max_waiters_per_peer = options_.limits.max_waiters_per_peer;
  if (c.waits.size() >= max_waiters_per_peer) {
    return Violation(c,
                     absl::StrCat("max_waiters_per_peer ", max_waiters_per_peer,
                                  " parked waits on one connection"));
  }
  return ParkWait(c, std::move(keys));
}

bool TcpStoreServer::Impl::OnCancelWait(Conn& c, const tcpstore::Request&) {
  absl::flat_hash_set<uint64_t> ids;
  ids.swap(c.waits);
  for (uint64_t wid : ids) DropWait(wid);
  tcpstore::AppendU8(&c.out, tcpstore::kWaitCanceled);
  return true;
}

bool TcpStoreServer::Impl::OnNumKeys(Conn& c, const tcpstore::Request&) {
  tcpstore::AppendI64(&c.out, static_cast<int64_t>(data_.values().size()));
  return true;
}

bool TcpStoreServer::Impl::OnDeleteKey(Conn& c, const tcpstore::Request& r) {
  const bool existed = data_.Erase(r.keys[0]);
  tcpstore::AppendI64(&c.out, existed ? 1 : 0);
  return true;
}

bool TcpStoreServer::Impl::OnQueuePush(Conn& c, const tcpstore::Request& r) {
  if (!data_.Push(r.keys[0], r.values[0])) {
    return Violation(
        c, absl::StrCat("max_total_bytes ", options_.limits.max_total_bytes));
  }
  Wake(r.keys[0], /*one=*/true);
  return true;
}

bool TcpStoreServer::Impl::OnQueuePop(Conn& c, const tcpstore::Request& r) {
  const size_t size = data_.QueueLength(r.keys[0]);
  tcpstore::AppendI64(&c.out, static_cast<int64_t>(size));
  if (size > 0) tcpstore::AppendBytes(&c.out, *data_.Pop(r.keys[0]));
  return true;
}

bool TcpStoreServer::Impl::OnQueueLen(Conn& c, const tcpstore::Request& r) {
  tcpstore::AppendI64(&c.out,
                      static_cast<int64_t>(data_.QueueLength(r.keys[0])));
  return true;
}

bool TcpStoreServer::Impl::OnListKeys(Conn& c, const tcpstore::Request&) {
  const TcpStoreData::Values& values = data_.values();
  size_t answer = sizeof(int64_t);
  for (const auto& [k, v] : values) answer += sizeof(uint64_t) + k.size();
  if (!AnswerFits(c, answer)) {
    return Violation(c,
                     absl::StrCat("list_keys answer of ", answer,
                                  " bytes over max_pending_output_", "bytes ",
                                  options_.max_pending_output_bytes));
  }
  tcpstore::AppendI64(&c.out, static_cast<int64_t>(values.size()));
  for (const auto& [k, v] : values) tcpstore::AppendBytes(&c.out, k);
  return true;
}

bool TcpStoreServer::Impl::AnswerFits(const Conn& c, size_t answer) const {
  return c.PendingOutput() + answer <= options_.max_pending_output_bytes;
}

void TcpStoreServer::Impl::Put(absl::string_view key, absl::string_view value) {
  data_.Put(key, value);
  Wake(key);
}

void TcpStoreServer::Impl::Wake(absl::string_view key, bool one) {
  const size_t parked = waits_.size();
  if (one) {
    if (auto woken = waits_.ArrivedOnce(key)) Answer(*woken);
  } else {
    for (const TcpStoreWaits::Woken& woken : waits_.Arrived(key)) {
      Answer(woken);
    }
  }
  if (waits_.size() != parked) {
    parked_.store(static_cast<int64_t>(waits_.size()),
                  std::memory_order_relaxed);
  }
}

void TcpStoreServer::Impl::Answer(const TcpStoreWaits::Woken& woken) {
  budgets_.RemoveWait(woken.id);
  auto c = conns_.find(woken.conn);
  if (c == conns_.end()) return;
  Conn& conn = *c->second;
  conn.waits.erase(woken.id);
  tcpstore::AppendU8(&conn.out, tcpstore::kStopWaiting);
  MarkDirty(conn);
}

bool TcpStoreServer::Impl::ParkWait(Conn& c, std::vector<std::string> keys) {
  const size_t bytes = TcpStoreWaits::Bytes(keys);
  for (;;) {
    const PeerBudgets::Verdict v = budgets_.AdmitWait(c.ip, bytes);
    if (v.kind == PeerBudgets::Verdict::kAdmit) break;
    if (v.kind == PeerBudgets::Verdict::kRefuse) return Violation(c, v.reason);
    // Another address's connection: never `c`, whose Conn& stays valid.
    Evict(v);
  }
  const uint64_t wid = next_wait_id_++;
  waits_.Park(wid, c.id, std::move(keys));
  budgets_.AddWait(c.ip, c.id, wid, bytes);
  c.waits.insert(wid);
  parked_.store(static_cast<int64_t>(waits_.size()), std::memory_order_relaxed);
  return true;
}

void TcpStoreServer::Impl::DropWait(uint64_t wait_id) {
  waits_.Drop(wait_id);
  budgets_.RemoveWait(wait_id);
  parked_.store(static_cast<int64_t>(waits_.size()), std::memory_order_relaxed);
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
