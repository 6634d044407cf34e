// The workers' TCPStore server's state and its handlers, private to
// //workerstore:tcpstore_server: its loop and connections are in
// tcpstore_server.cc, the operations it serves in tcpstore_ops.cc.
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_SERVER_IMPL_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_SERVER_IMPL_H_

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/heap_trim.h"
#include "common/log_rate_limiter.h"
#include "workerstore/allowed_peers.h"
#include "workerstore/peer_budgets.h"
#include "workerstore/tcpstore_conn.h"
#include "workerstore/tcpstore_data.h"
#include "workerstore/tcpstore_protocol.h"
#include "workerstore/tcpstore_server.h"
#include "workerstore/tcpstore_waits.h"

namespace distjob {

class TcpStoreServer::Impl {
 public:
  explicit Impl(const TcpStoreServerOptions& o);
  ~Impl();

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
    for (size_t i = 0; i < static_cast<size_t>(tcpstore::Op::kCount); ++i) {
      const int64_t n = requests_[i].load(std::memory_order_relaxed);
      if (n > 0) s.requests[tcpstore::OpName(static_cast<tcpstore::Op>(i))] = n;
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
  // The last Accept() stopped at its batch, with more perhaps queued: the
  // loop accepts again next pass. epoll reports the listener as one of
  // up to 16K ready sockets, one pass in 64 under a 16K-rank all-gather,
  // and ranks still connecting overflowed the kernel's queue (reset after
  // a minute) while the ranks already in kept every pass busy.
  bool accept_pending_ = false;
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
  // Valid only within OnMultiGet: the next write may move them.
  std::vector<const TcpStoreValue*> found_;

  std::atomic<int64_t> clients_{0}, parked_{0};
  std::atomic<int64_t> protocol_errors_{0}, refused_{0}, sleeps_{0},
      stream_pauses_{0}, accept_pauses_{0}, evictions_{0}, buffered_bytes_{0};
  // Whether the loop's current batch sent anything (Flush), and whether it
  // served a set (which has no answer): a batch of sets that answered no
  // one is a stream's (Loop).
  bool answered_ = false;
  bool streamed_ = false;
  std::atomic<int64_t>
      requests_[static_cast<size_t>(tcpstore::Op::kCount) + 1] = {};
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_SERVER_IMPL_H_
