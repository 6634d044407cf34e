#include "rendezvous/store/server/conn_limiter.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/fd_budget.h"
#include "common/heap_trim.h"
#include "common/listen.h"
#include "common/logging.h"
#include "rendezvous/store/server/h2_first_bytes.h"

namespace distjob {
namespace {

// What a connection is doing, as the loop sees it.
enum class Phase {
  kFirstBytes,  // accepted; waiting to see what the client speaks
  kMismatch,    // a plaintext HTTP/2 client of a TLS store: read to HEADERS
  kClosing,     // answered and shut down for writing; drained until closed
  kHanded,      // gRPC's: `fd` is our dup, watched for the shutdown
};

struct Conn {
  int fd = -1;
  std::string addr;
  uint64_t seq = 0;
  Phase phase = Phase::kFirstBytes;
  absl::Time deadline = absl::InfiniteFuture();
  std::string buf;             // kMismatch: the bytes read so far
  bool sent_settings = false;  // kMismatch
};

constexpr size_t kMaxMismatchBytes = 64 << 10;
constexpr absl::Duration kDrainTime = absl::Seconds(2);
constexpr absl::Duration kLogEvery = absl::Seconds(10);
// What gRPC holds for a connection that finished its HTTP/2 handshake
// (~17 KiB measured with gRPC 1.51), counted toward a heap trim once it
// closed: freed on gRPC's threads, those pages stayed in glibc's arenas,
// and the store host's RSS stayed 5x its size after a flood had ended.
constexpr size_t kHandedConnBytes = 16 << 10;
// How long after a close gRPC has surely freed its transport.
constexpr absl::Duration kTrimDelay = absl::Seconds(1);

std::string FlagsHint(bool tls) {
  return tls ? "set --rdzv-tls-cert and --rdzv-tls-key (and --rdzv-tls-ca "
               "for mutual TLS) to the same files on every node"
             : "use the same --rdzv-tls-* flags on every node (none, or the "
               "store host's)";
}

// An HPACK integer with an n-bit prefix (RFC 7541 5.1).
void HpackInt(std::string* out, uint8_t first, int bits, size_t value) {
  const size_t max = (size_t{1} << bits) - 1;
  if (value < max) {
    out->push_back(static_cast<char>(first | value));
    return;
  }
  out->push_back(static_cast<char>(first | max));
  value -= max;
  while (value >= 128) {
    out->push_back(static_cast<char>((value % 128) + 128));
    value /= 128;
  }
  out->push_back(static_cast<char>(value));
}

// A literal header field without indexing, new name, no Huffman.
void HpackLiteral(std::string* out, const std::string& name,
                  const std::string& value) {
  out->push_back(0);
  HpackInt(out, 0, 7, name.size());
  out->append(name);
  HpackInt(out, 0, 7, value.size());
  out->append(value);
}

void H2Frame(std::string* out, uint8_t type, uint8_t flags, uint32_t stream,
             const std::string& payload) {
  const size_t n = payload.size();
  out->push_back(static_cast<char>((n >> 16) & 0xff));
  out->push_back(static_cast<char>((n >> 8) & 0xff));
  out->push_back(static_cast<char>(n & 0xff));
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((stream >> shift) & 0xff));
  }
  out->append(payload);
}

// The server's preface: an empty SETTINGS, and the ACK of the client's
// (sent with its preface). The client sends its first call after these.
std::string H2Settings() {
  std::string out;
  H2Frame(&out, 0x4, 0, 0, "");
  H2Frame(&out, 0x4, 0x1, 0, "");
  return out;
}

// The server's side of one refused call: its trailers-only answer
// (FAILED_PRECONDITION with `message`), and a GOAWAY.
std::string H2Refusal(uint32_t stream, const std::string& message) {
  std::string out;
  std::string headers;
  HpackLiteral(&headers, ":status", "200");
  HpackLiteral(&headers, "content-type", "application/grpc");
  HpackLiteral(&headers, "grpc-status", "9");
  HpackLiteral(&headers, "grpc-message", message);  // plain ASCII, no '%'
  H2Frame(&out, 0x1, 0x1 | 0x4, stream, headers);   // END_STREAM|END_HEADERS
  std::string goaway(8, '\0');
  for (int i = 0; i < 4; ++i) {
    goaway[i] = static_cast<char>((stream >> (24 - 8 * i)) & 0xff);
  }
  goaway.append(message);
  H2Frame(&out, 0x7, 0, 0, goaway);
  return out;
}

std::string AddressText(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr,
              text, sizeof(text));
    return text;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
    return text;
  }
  inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
  return text;
}

void WriteAll(int fd, const std::string& data) {
  size_t at = 0;
  while (at < data.size()) {
    const ssize_t n =
        send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return;  // a fresh socket's buffer holds these few bytes
    at += static_cast<size_t>(n);
  }
}

// At most one line per kLogEvery for one kind of event, with how many
// were not logged.
class RateLimitedLog {
 public:
  void Log(const std::string& line) {
    const absl::Time now = absl::Now();
    if (now - last_ < kLogEvery) {
      ++skipped_;
      return;
    }
    if (skipped_ > 0) {
      DJ_LOG_WARNING("{} ({} more like it in the last {}s)", line, skipped_,
                     absl::ToInt64Seconds(kLogEvery));
    } else {
      DJ_LOG_WARNING("{}", line);
    }
    last_ = now;
    skipped_ = 0;
  }

 private:
  absl::Time last_ = absl::InfinitePast();
  int64_t skipped_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ConnLimiter>> ConnLimiter::Listen(
    const std::string& host, int port, ConnLimits limits, bool tls) {
  // As gRPC's own listener: SO_REUSEADDR, a restarted host binds over
  // TIME_WAIT (ListenTcp).
  absl::StatusOr<int> fd = ListenTcp(host, port, 1024);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat(limits.name, ": ", fd.status().message()));
  }
  std::unique_ptr<ConnLimiter> l(new ConnLimiter());
  l->tls_ = tls;
  l->listen_fd_ = *fd;
  l->port_ = BoundPort(l->listen_fd_);

  // Each connection holds two descriptors (ours and gRPC's).
  FitConnections(limits.fd_user, 2,
                 absl::StrCat(limits.name, ": ", limits.total_cap),
                 &limits.max_conns, &limits.max_conns_per_peer);
  l->limits_ = limits;
  l->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l->wake_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat(limits.name, ": ", "eventfd: ", strerror(errno)));
  }
  return l;
}

void ConnLimiter::Start(Handoff handoff) {
  handoff_ = std::move(handoff);
  thread_ = std::thread([this] { Loop(); });
}

void ConnLimiter::Stop() {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    // Only EAGAIN can fail it (the counter is full): the loop is awake then.
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

ConnLimiter::~ConnLimiter() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

ConnStats ConnLimiter::Stats() const {
  ConnStats s;
  s.open = open_.load(std::memory_order_relaxed);
  s.refused = refused_.load(std::memory_order_relaxed);
  s.evicted = evicted_.load(std::memory_order_relaxed);
  s.protocol_mismatch = mismatch_.load(std::memory_order_relaxed);
  return s;
}

// The accept loop's thread: what the loop knows of every connection it
// holds, and one method per step, the state a member rather than a local
// of one long function.
class ConnLimiter::AcceptLoop {
 public:
  explicit AcceptLoop(ConnLimiter& owner)
      : owner_(owner), limits_(owner.limits_) {}
  AcceptLoop(const AcceptLoop&) = delete;
  AcceptLoop& operator=(const AcceptLoop&) = delete;

  // Until Stop; closes what it holds before it returns.
  void Run();

 private:
  bool Watch(int fd, uint32_t events);
  void ResumeAccept();
  // How long epoll may wait: until the next first-bytes deadline, at most
  // a second.
  int TimeoutMs();
  // Accepts what is waiting on the listener.
  void AcceptAll();
  void OnEvent(int fd);
  // Closes the connections whose deadline has passed, and trims the heap
  // once gRPC has surely freed what closed.
  void Expire();
  void Forget(int fd);
  // Ends gRPC's connection too: its fd and our dup share the socket.
  void Evict(int fd);
  void Refuse(int fd, const std::string& addr, const std::string& why);
  void Admit(int fd, const std::string& addr);
  // Under max_conns, or after evicting the oldest connection of the
  // address holding the most; false when `fd` was refused instead.
  bool MakeRoom(int fd, const std::string& addr);
  void CloseAfter(Conn& c, const std::string& answer);
  void HandOver(Conn& c);
  // What the first bytes say: false when the connection is gone, handed
  // or answered.
  bool OnFirstBytes(Conn& c);
  void OnReadable(Conn& c);

  ConnLimiter& owner_;
  const ConnLimits& limits_;
  int ep_ = -1;
  // Out of fds, the listener stays readable: it leaves epoll (no
  // spinning) until a connection ends or a second has passed.
  absl::Time accept_paused_at_ = absl::InfinitePast();
  bool accept_paused_ = false;
  absl::flat_hash_map<int, Conn> conns_;  // by the fd we watch
  // Per address, its connections oldest first (seq -> fd).
  absl::flat_hash_map<std::string, std::map<uint64_t, int>> by_addr_;
  std::set<int> waiting_;  // fds not yet handed to gRPC (have a deadline)
  uint64_t next_seq_ = 0;
  RateLimitedLog refused_log_, mismatch_log_;
  // Memory gRPC freed for closed connections goes back to the kernel.
  HeapTrimPacer trim_{8 << 20, absl::Seconds(1)};
  absl::Time trim_at_ = absl::InfiniteFuture();
};

void ConnLimiter::Loop() {
  AcceptLoop loop(*this);
  loop.Run();
}

void ConnLimiter::AcceptLoop::Run() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  if (ep_ < 0) {
    DJ_LOG_ERROR("{}: epoll_create1: {}", limits_.name, strerror(errno));
    return;
  }
  Watch(owner_.listen_fd_, EPOLLIN);
  Watch(owner_.wake_fd_, EPOLLIN);
  std::vector<epoll_event> events(256);
  bool stopping = false;
  while (!stopping) {
    if (accept_paused_ && absl::Now() - accept_paused_at_ >= absl::Seconds(1)) {
      ResumeAccept();  // fds freed elsewhere in the process
    }
    const int n = epoll_wait(ep_, events.data(),
                             static_cast<int>(events.size()), TimeoutMs());
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == owner_.wake_fd_) {
        stopping = true;
        continue;
      }
      OnEvent(fd);
    }
    Expire();
  }
  std::vector<int> all;
  for (const auto& [fd, c] : conns_) all.push_back(fd);
  for (int fd : all) Forget(fd);
  close(ep_);
}

bool ConnLimiter::AcceptLoop::Watch(int fd, uint32_t events) {
  epoll_event ev = {};
  ev.events = events;
  ev.data.fd = fd;
  return epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void ConnLimiter::AcceptLoop::ResumeAccept() {
  if (!accept_paused_) return;
  accept_paused_ = !Watch(owner_.listen_fd_, EPOLLIN);
}

int ConnLimiter::AcceptLoop::TimeoutMs() {
  absl::Time next = absl::InfiniteFuture();
  for (int fd : waiting_) next = std::min(next, conns_[fd].deadline);
  const absl::Duration until = next - absl::Now();
  // At most a second (a wait with none waiting is infinite: clamped
  // before the +1 that rounds up, which would overflow it).
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(until), -1, 999) + 1);
}

void ConnLimiter::AcceptLoop::AcceptAll() {
  // Bounded per wake-up so that closes and first bytes keep flowing.
  for (int k = 0; k < 256; ++k) {
    sockaddr_storage peer = {};
    socklen_t len = sizeof(peer);
    const int c = accept4(owner_.listen_fd_, reinterpret_cast<sockaddr*>(&peer),
                          &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        refused_log_.Log(absl::StrCat(limits_.name, ": ",
                                      "cannot accept: ", strerror(errno)));
        epoll_ctl(ep_, EPOLL_CTL_DEL, owner_.listen_fd_, nullptr);
        accept_paused_ = true;
        accept_paused_at_ = absl::Now();
      }
      return;
    }
    Admit(c, AddressText(peer));
  }
}

void ConnLimiter::AcceptLoop::OnEvent(int fd) {
  if (fd == owner_.listen_fd_) {
    AcceptAll();
    return;
  }
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if (c.phase == Phase::kHanded) {
    Forget(fd);
    trim_.Released(kHandedConnBytes);
    trim_at_ = absl::Now() + kTrimDelay;
    return;
  }
  OnReadable(c);
}

void ConnLimiter::AcceptLoop::Expire() {
  const absl::Time now = absl::Now();
  std::vector<int> late;
  for (int fd : waiting_) {
    if (conns_[fd].deadline <= now) late.push_back(fd);
  }
  for (int fd : late) Forget(fd);
  if (now >= trim_at_ && trim_.Due(now)) {
    TrimHeap();
    trim_at_ = absl::InfiniteFuture();
  }
}

void ConnLimiter::AcceptLoop::Forget(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  auto a = by_addr_.find(it->second.addr);
  if (a != by_addr_.end()) {
    a->second.erase(it->second.seq);
    if (a->second.empty()) by_addr_.erase(a);
  }
  epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  waiting_.erase(fd);
  conns_.erase(it);
  owner_.open_.fetch_sub(1, std::memory_order_relaxed);
  ResumeAccept();
}

void ConnLimiter::AcceptLoop::Evict(int fd) {
  shutdown(fd, SHUT_RDWR);
  Forget(fd);
  owner_.evicted_.fetch_add(1, std::memory_order_relaxed);
}

void ConnLimiter::AcceptLoop::Refuse(int fd, const std::string& addr,
                                     const std::string& why) {
  close(fd);
  owner_.refused_.fetch_add(1, std::memory_order_relaxed);
  refused_log_.Log(absl::StrCat(limits_.name, ": ",
                                "refused a connection from ", addr, ": ", why));
}

void ConnLimiter::AcceptLoop::Admit(int fd, const std::string& addr) {
  auto& mine = by_addr_[addr];
  if (mine.size() >= limits_.max_conns_per_peer) {
    if (mine.empty()) by_addr_.erase(addr);
    Refuse(fd, addr,
           absl::StrCat("it has ", limits_.max_conns_per_peer,
                        " open, the limit (", limits_.peer_cap, ")"));
    return;
  }
  if (conns_.size() >= limits_.max_conns && !MakeRoom(fd, addr)) return;
  const int nodelay = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
  Conn c;
  c.fd = fd;
  c.addr = addr;
  c.seq = next_seq_++;
  c.deadline = absl::Now() + limits_.first_bytes_timeout;
  by_addr_[addr][c.seq] = fd;
  conns_[fd] = std::move(c);
  waiting_.insert(fd);
  owner_.open_.fetch_add(1, std::memory_order_relaxed);
  Watch(fd, EPOLLIN | EPOLLRDHUP);
}

bool ConnLimiter::AcceptLoop::MakeRoom(int fd, const std::string& addr) {
  const size_t mine = by_addr_[addr].size();
  const std::string* biggest = nullptr;
  size_t most = 0;
  for (const auto& [a, list] : by_addr_) {
    if (list.size() > most) {
      most = list.size();
      biggest = &a;
    }
  }
  if (biggest == nullptr || *biggest == addr || most <= mine + 1) {
    if (mine == 0) by_addr_.erase(addr);
    Refuse(fd, addr,
           absl::StrCat("the server has ", limits_.max_conns,
                        " open, the limit (", limits_.total_cap, ")"));
    return false;
  }
  const std::string victim = *biggest;
  Evict(by_addr_[victim].begin()->second);
  refused_log_.Log(absl::StrCat(
      limits_.name, ": ", "closed the oldest connection of ", victim,
      " (it has the most) to admit ", addr, ": the server is at its limit (",
      limits_.total_cap, ") of ", limits_.max_conns));
  return true;
}

void ConnLimiter::AcceptLoop::CloseAfter(Conn& c, const std::string& answer) {
  // Counted before the client can read the answer.
  owner_.mismatch_.fetch_add(1, std::memory_order_relaxed);
  WriteAll(c.fd, answer);
  shutdown(c.fd, SHUT_WR);
  c.phase = Phase::kClosing;
  c.deadline = absl::Now() + kDrainTime;
  c.buf.clear();
}

void ConnLimiter::AcceptLoop::HandOver(Conn& c) {
  const int dup = fcntl(c.fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    const std::string addr = c.addr;
    Forget(c.fd);
    owner_.refused_.fetch_add(1, std::memory_order_relaxed);
    refused_log_.Log(absl::StrCat(limits_.name, ": ",
                                  "refused a connection "
                                  "from ",
                                  addr, ": ", strerror(errno)));
    return;
  }
  const int fd = c.fd;
  epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
  waiting_.erase(fd);
  Conn moved = std::move(c);
  conns_.erase(fd);
  moved.fd = dup;
  moved.phase = Phase::kHanded;
  moved.deadline = absl::InfiniteFuture();
  by_addr_[moved.addr][moved.seq] = dup;
  conns_[dup] = std::move(moved);
  // gRPC shuts its socket down (shutdown(2)) when it ends a connection,
  // whoever ended it: the dup then reports the hang-up.
  Watch(dup, EPOLLRDHUP);
  owner_.handoff_(fd);
}

bool ConnLimiter::AcceptLoop::OnFirstBytes(Conn& c) {
  const bool tls = owner_.tls_;
  char head[kH2PrefaceLen];
  const ssize_t n = recv(c.fd, head, sizeof(head), MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0) {
    Forget(c.fd);
    return false;
  }
  const bool tls_hello = head[0] == 0x16;
  if (tls && !tls_hello && head[0] == 'P') {
    c.phase = Phase::kMismatch;  // the bytes are read by OnReadable
    mismatch_log_.Log(
        absl::StrCat(limits_.name, ": ", "a plaintext client at ", c.addr,
                     " connected to this TLS store: ", FlagsHint(true)));
    return true;
  }
  if (!tls && tls_hello) {
    mismatch_log_.Log(
        absl::StrCat(limits_.name, ": a TLS client at ", c.addr,
                     " connected to this plaintext store: ", FlagsHint(false)));
    CloseAfter(
        c, absl::StrCat(kStoreSpeaksPlaintext, ": ", FlagsHint(false), "\r\n"));
    return false;
  }
  HandOver(c);
  return false;
}

void ConnLimiter::AcceptLoop::OnReadable(Conn& c) {
  if (c.phase == Phase::kFirstBytes && !OnFirstBytes(c)) return;
  char chunk[4096];
  // Bounded per wake-up: a peer that keeps sending to a closing
  // connection must not hold the one accept thread.
  for (size_t read = 0; read < kMaxMismatchBytes;) {
    const ssize_t n = recv(c.fd, chunk, sizeof(chunk), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    if (n <= 0) return Forget(c.fd);
    read += static_cast<size_t>(n);
    if (c.phase == Phase::kClosing) continue;
    c.buf.append(chunk, static_cast<size_t>(n));
    if (c.buf.size() > kMaxMismatchBytes) return Forget(c.fd);
  }
  if (c.phase != Phase::kMismatch) return;
  const int64_t stream = FirstHeadersStream(c.buf);
  if (stream < 0) return Forget(c.fd);
  if (!c.sent_settings && c.buf.size() >= kH2PrefaceLen) {
    WriteAll(c.fd, H2Settings());
    c.sent_settings = true;
  }
  if (stream == 0) return;
  CloseAfter(c, H2Refusal(static_cast<uint32_t>(stream),
                          absl::StrCat(
                              kStoreSpeaksTls,
                              " and this agent does not: ", FlagsHint(true))));
}

}  // namespace distjob
