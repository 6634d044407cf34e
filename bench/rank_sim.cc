// A TCPStore rank simulator: N client connections, from a few epoll
// threads, that each do what a PyTorch 2.2+ rank does with the store at
// start (the validation handshake, then one pattern), against a
// TCPStore-protocol server (the agent's, tcpstore_server_main, or
// PyTorch's own). One JSON line on stdout reports the time to all
// connected, the time to all done (the barrier released), each rank's
// latency and, with --server-pid, the server's peak RSS and CPU time.
//
//   rank_sim --port N --ranks N [--host 127.0.0.1]
//       [--pattern barrier|nccl|allgather] [--threads 2]
//       [--per-source 1000] [--max-connecting 256] [--batch 512]
//       [--value-bytes 100] [--timeout-s 60] [--server-pid PID]
//       [--prefix rank_sim/] [--dialect validated|legacy] [--hold]
//
// Exit 0 when every rank finished its pattern, 1 when one failed (the
// others stop there) or the deadline passed first, 2 for a bad flag.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/rank_sim_lib.h"
#include "common/json.h"

namespace distjob {
namespace ranksim {
namespace {

struct Rank {
  enum State : uint8_t { kWaiting, kConnecting, kRunning, kDone, kFailed };
  State state = kWaiting;
  int fd = -1;
  std::string in, out;
  size_t out_off = 0;
  uint64_t received = 0;  // bytes of answers read
  Expect expect;
  absl::Time connect_start, connected, done;
};

// What a server process has used so far, from /proc (zeros when it is
// gone or none was named).
struct ServerUse {
  int64_t rss_kib = 0, peak_rss_kib = 0;
  double cpu_s = 0;
  double wait_s = 0;  // its threads' time runnable but waiting for a CPU
};

// A thread's time runnable but not running (the second field of
// /proc/.../schedstat, ns), in seconds; 0 when unreadable.
double RunDelay(const std::string& schedstat) {
  std::ifstream in(schedstat);
  double running_ns = 0, waiting_ns = 0;
  if (!(in >> running_ns >> waiting_ns)) return 0;
  return waiting_ns / 1e9;
}

// The run delay of every thread of `pid` alive now.
double ProcessRunDelay(int pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  double total = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    total += RunDelay(absl::StrCat(dir, "/", e->d_name, "/schedstat"));
  }
  closedir(d);
  return total;
}

ServerUse ReadServerUse(int pid) {
  ServerUse u;
  if (pid == 0) return u;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string name;
    int64_t kib = 0;
    fields >> name >> kib;
    if (name == "VmRSS:") u.rss_kib = kib;
    if (name == "VmHWM:") u.peak_rss_kib = kib;
  }
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  // The fields after the command's closing parenthesis: utime and stime
  // are the 12th and 13th of them.
  std::istringstream rest(text.substr(text.rfind(')') + 1));
  std::string field;
  double ticks = 0;
  for (int i = 1; i <= 13 && rest >> field; ++i) {
    if (i >= 12) ticks += std::strtod(field.c_str(), nullptr);
  }
  u.cpu_s = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  u.wait_s = ProcessRunDelay(pid);
  return u;
}

// The ranks whose index is `index` modulo the thread count, driven by one
// epoll set.
class Shard {
 public:
  // `failed`: set by the first rank to fail, in any shard.
  Shard(const SimOptions& o, int index, std::vector<Rank>* ranks,
        std::vector<RankProgram>* programs, std::atomic<bool>* failed)
      : o_(o),
        index_(index),
        ranks_(*ranks),
        programs_(*programs),
        failed_(*failed) {}

  void Run(absl::Time deadline);
  const std::string& first_error() const { return first_error_; }
  // Seconds this shard's thread was runnable but waiting for a CPU.
  double wait_s() const { return wait_s_; }

 private:
  void StartConnect(int r);
  void OnEvent(int r, uint32_t events);
  void OnConnected(int r);
  void OnReadable(int r);
  void Flush(int r);
  void Fail(int r, const std::string& why);
  void Finish(int r, Rank::State state);
  void MarkDone(int r);

  const SimOptions& o_;
  const int index_;
  std::vector<Rank>& ranks_;
  std::vector<RankProgram>& programs_;
  std::atomic<bool>& failed_;
  int epoll_ = -1;
  int connecting_ = 0, unfinished_ = 0;
  std::string first_error_;
  double wait_s_ = 0;
  // The answer being parsed, kept so that its strings are reused.
  Answer answer_;
};

void Shard::Run(absl::Time deadline) {
  // On a shared machine the run's time is partly others': how long the
  // simulator waited for a CPU says how much (the server's, ReadServerUse).
  const double delay_before = RunDelay("/proc/thread-self/schedstat");
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  int next = index_;
  const int n = static_cast<int>(ranks_.size());
  std::vector<epoll_event> events(1024);
  for (int r = index_; r < n; r += o_.threads) ++unfinished_;
  // One failed rank fails the run (no all_done_s): the others stop then,
  // rather than wait out --timeout-s for a barrier that cannot complete.
  while (absl::Now() < deadline && !failed_.load(std::memory_order_relaxed)) {
    for (; next < n && connecting_ < o_.max_connecting; next += o_.threads) {
      StartConnect(next);
    }
    if (unfinished_ == 0) break;
    const int ms = std::clamp<int64_t>(
        absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 100);
    const int got = epoll_wait(epoll_, events.data(), events.size(), ms);
    for (int i = 0; i < got; ++i) {
      OnEvent(static_cast<int>(events[i].data.u64), events[i].events);
    }
  }
  for (int r = index_; r < n; r += o_.threads) {
    const Rank::State s = ranks_[r].state;
    if (s == Rank::kDone || s == Rank::kFailed) continue;
    if (failed_.load(std::memory_order_relaxed)) {
      Finish(r, Rank::kFailed);  // the rank that failed says why
    } else {
      Fail(r, absl::StrCat("rank ", r, ": not done by --timeout-s"));
    }
  }
  close(epoll_);  // the connections stay open for --hold
  wait_s_ = RunDelay("/proc/thread-self/schedstat") - delay_before;
}

void Shard::StartConnect(int r) {
  Rank& k = ranks_[r];
  k.connect_start = absl::Now();
  k.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (k.fd < 0) {
    return Fail(r, absl::StrCat("rank ", r, ": socket: ", strerror(errno)));
  }
  const int one = 1;
  setsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(o_.port);
  inet_pton(AF_INET, o_.host.c_str(), &server.sin_addr);
  if ((ntohl(server.sin_addr.s_addr) >> 24) == 127) {
    // Loopback: spread over 127.0.0.0/8 so that neither one address's
    // ephemeral ports nor the server's per-address budgets run out; the
    // port is picked at connect, by the whole 4-tuple.
    setsockopt(k.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(0x7F000001u + r / o_.per_source);
    if (bind(k.fd, reinterpret_cast<sockaddr*>(&source), sizeof(source))) {
      char text[INET_ADDRSTRLEN] = "";
      inet_ntop(AF_INET, &source.sin_addr, text, sizeof(text));
      return Fail(r, absl::StrCat("rank ", r, ": bind to ", text, ": ",
                                  strerror(errno)));
    }
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = static_cast<uint64_t>(r);
  epoll_ctl(epoll_, EPOLL_CTL_ADD, k.fd, &ev);
  k.state = Rank::kConnecting;
  ++connecting_;
  if (connect(k.fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) &&
      errno != EINPROGRESS) {
    Fail(r, absl::StrCat("connect to ", o_.host, ":", o_.port, ": ",
                         strerror(errno)));
  }
}

void Shard::OnEvent(int r, uint32_t events) {
  Rank& k = ranks_[r];
  if (k.state == Rank::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(k.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return Fail(r, absl::StrCat("connect to ", o_.host, ":", o_.port, ": ",
                                  strerror(err)));
    }
    if (!(events & EPOLLOUT)) return;
    OnConnected(r);
  }
  if (k.state == Rank::kRunning || k.state == Rank::kDone) {
    if (events & EPOLLOUT) Flush(r);
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) OnReadable(r);
  }
}

void Shard::OnConnected(int r) {
  Rank& k = ranks_[r];
  --connecting_;
  k.connected = absl::Now();
  k.state = Rank::kRunning;
  k.expect = programs_[r].Start(&k.out);
  if (k.expect.kind == Expect::kNone) MarkDone(r);
  Flush(r);
}

void Shard::OnReadable(int r) {
  Rank& k = ranks_[r];
  char buf[65536];
  for (;;) {
    const ssize_t got = read(k.fd, buf, sizeof(buf));
    if (got > 0) {
      k.in.append(buf, got);
      k.received += got;
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
    // The server closed it: a failure unless the rank was done.
    if (k.state == Rank::kDone) return Finish(r, Rank::kDone);
    return Fail(r, absl::StrCat("rank ", r,
                                ": the server closed the "
                                "connection"));
  }
  size_t off = 0;
  while (k.state == Rank::kRunning) {
    const size_t n =
        ParseAnswer(k.expect, absl::string_view(k.in).substr(off), &answer_);
    if (n == 0) break;
    off += n;
    absl::StatusOr<Expect> next = programs_[r].OnAnswer(answer_, &k.out);
    if (!next.ok()) return Fail(r, std::string(next.status().message()));
    k.expect = *next;
    if (k.expect.kind == Expect::kNone) MarkDone(r);
  }
  k.in.erase(0, off);
  Flush(r);
}

void Shard::Flush(int r) {
  Rank& k = ranks_[r];
  while (k.out_off < k.out.size()) {
    const ssize_t n = send(k.fd, k.out.data() + k.out_off,
                           k.out.size() - k.out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return Fail(r, absl::StrCat("rank ", r, ": send: ", strerror(errno)));
    }
    k.out_off += n;
  }
  k.out.clear();
  k.out_off = 0;
}

void Shard::Fail(int r, const std::string& why) {
  if (first_error_.empty()) first_error_ = why;
  failed_.store(true, std::memory_order_relaxed);
  Finish(r, Rank::kFailed);
}

void Shard::MarkDone(int r) {
  ranks_[r].state = Rank::kDone;
  ranks_[r].done = absl::Now();
  --unfinished_;
}

// Closes a rank's connection, which --hold keeps open otherwise.
void Shard::Finish(int r, Rank::State state) {
  Rank& k = ranks_[r];
  if (k.state == Rank::kConnecting) --connecting_;
  if (state == Rank::kFailed && k.state != Rank::kDone &&
      k.state != Rank::kFailed) {
    --unfinished_;
  }
  // A rank that passed stays passed, whatever its connection does next.
  if (k.state != Rank::kDone) k.state = state;
  if (k.fd >= 0) {
    close(k.fd);
    k.fd = -1;
  }
}

Json Latency(std::vector<double> ms) {
  const Percentiles p = ComputePercentiles(&ms);
  return {{"p50", p.p50}, {"p99", p.p99}, {"max", p.max}};
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// The one report line: times from the start of the run, per-rank
// latencies (connect: its connect's; latency: connected to done).
Json Report(const SimOptions& o, const std::vector<Rank>& ranks,
            absl::Time start, const ServerUse& before, const ServerUse& after,
            double sim_wait_s) {
  static const char* const kNames[] = {"barrier", "nccl", "allgather"};
  int64_t passed = 0, connected = 0;
  uint64_t received = 0;
  absl::Time last_connected = start, last_done = start;
  std::vector<double> connect_ms, latency_ms;
  for (const Rank& k : ranks) {
    received += k.received;
    if (k.connected != absl::Time()) {
      ++connected;
      last_connected = std::max(last_connected, k.connected);
      connect_ms.push_back(
          absl::ToDoubleMilliseconds(k.connected - k.connect_start));
    }
    if (k.state != Rank::kDone) continue;
    ++passed;
    last_done = std::max(last_done, k.done);
    latency_ms.push_back(absl::ToDoubleMilliseconds(k.done - k.connected));
  }
  const int64_t n = static_cast<int64_t>(ranks.size());
  Json report = {
      {"pattern", kNames[static_cast<int>(o.pattern)]},
      {"ranks", n},
      {"connected", connected},
      {"passed", passed},
      {"failed", n - passed},
      // null when not every rank got that far
      {"all_connected_s",
       connected == n ? Json(Seconds(last_connected - start)) : Json()},
      {"all_done_s", passed == n ? Json(Seconds(last_done - start)) : Json()},
      // Every answer byte the ranks read (an all-gather's O(N²)): with
      // the server's CPU, its cost per byte.
      {"bytes_received", static_cast<int64_t>(received)},
      {"connect_ms", Latency(std::move(connect_ms))},
      {"latency_ms", Latency(std::move(latency_ms))},
      // The simulator's threads' time runnable but waiting for a CPU.
      {"sim_wait_s", sim_wait_s},
  };
  if (o.server_pid != 0) {
    report["server"] = {{"pid", o.server_pid},
                        {"rss_kib_before", before.rss_kib},
                        {"rss_kib_after", after.rss_kib},
                        {"peak_rss_kib", after.peak_rss_kib},
                        {"cpu_s", after.cpu_s - before.cpu_s},
                        {"wait_s", after.wait_s - before.wait_s}};
  }
  return report;
}

// Raises the open-file soft limit to the hard one; false when that is
// still too few for `ranks` connections.
bool RaiseFdLimit(int ranks, rlim_t* limit) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  getrlimit(RLIMIT_NOFILE, &rl);
  *limit = rl.rlim_cur;
  return rl.rlim_cur >= static_cast<rlim_t>(ranks) + 64;
}

// --hold: until stdin ends, or --timeout-s more.
void Hold(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  char buf[256];
  while (absl::Now() < deadline) {
    pollfd p{0, POLLIN, 0};
    const int ms = std::clamp<int64_t>(
        absl::ToInt64Milliseconds(deadline - absl::Now()), 0, 1000);
    if (poll(&p, 1, ms) > 0 && read(0, buf, sizeof(buf)) <= 0) return;
  }
}

int Main(int argc, char** argv) {
  absl::StatusOr<SimOptions> parsed =
      ParseFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) {
    std::fprintf(stderr, "rank_sim: %s\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  const SimOptions& o = *parsed;
  in_addr addr{};
  if (inet_pton(AF_INET, o.host.c_str(), &addr) != 1) {
    std::fprintf(stderr, "rank_sim: --host: want an IPv4 address, got '%s'\n",
                 o.host.c_str());
    return 2;
  }
  rlim_t limit = 0;
  if (!RaiseFdLimit(o.ranks, &limit)) {
    std::fprintf(stderr,
                 "rank_sim: --ranks %d needs %d open files; the limit is %lu\n",
                 o.ranks, o.ranks + 64, static_cast<unsigned long>(limit));
    return 2;
  }
  std::vector<Rank> ranks(o.ranks);
  std::vector<RankProgram> programs;
  programs.reserve(o.ranks);
  for (int r = 0; r < o.ranks; ++r) {
    programs.emplace_back(o, r);
  }
  const ServerUse before = ReadServerUse(o.server_pid);
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o.timeout;
  const int threads = std::min(o.threads, o.ranks);
  std::vector<Shard> shards;
  shards.reserve(threads);
  std::atomic<bool> failed{false};
  for (int t = 0; t < threads; ++t)
    shards.emplace_back(o, t, &ranks, &programs, &failed);
  std::vector<std::thread> running;
  for (Shard& s : shards)
    running.emplace_back([&s, deadline] { s.Run(deadline); });
  for (std::thread& t : running) t.join();
  const ServerUse after = ReadServerUse(o.server_pid);
  double sim_wait_s = 0;
  for (const Shard& s : shards) sim_wait_s += s.wait_s();
  const Json report = Report(o, ranks, start, before, after, sim_wait_s);
  std::printf("%s\n", DumpJson(report).c_str());
  std::fflush(stdout);
  for (const Shard& s : shards) {
    if (!s.first_error().empty()) {
      std::fprintf(stderr, "rank_sim: %s\n", s.first_error().c_str());
    }
  }
  if (o.hold) Hold(o.timeout);
  return report["failed"].get<int64_t>() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ranksim
}  // namespace distjob

int main(int argc, char** argv) {
  // The connections close with the process, all at once.
  std::_Exit(distjob::ranksim::Main(argc, argv));
}
