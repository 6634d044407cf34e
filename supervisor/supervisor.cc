#include "supervisor/supervisor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errno_status.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/text.h"
#include "supervisor/device_fence.h"
#include "supervisor/exit_policy.h"
#include "supervisor/process_tree.h"
#include "supervisor/signal_names.h"
#include "supervisor/thread_states.h"
#include "supervisor/tree_guard.h"

namespace distjob {

struct Supervisor::Running {
  struct Worker {
    int local_rank;
    pid_t pid;
    int exec_errno;
    bool exited = false;
    std::string heartbeat_file;
    std::string error_file;
    std::string server_socket;
    absl::Time started;
    bool signalled = false;  // sent a stop signal (or SIGKILL) by the agent
  };
  std::vector<Worker> workers;
  GroupResult result;
  bool stopping = false;
  bool killed = false;
  absl::Time kill_deadline = absl::InfiniteFuture();
  // Workers spared by StopGroup get the stop signal at this time.
  absl::Time dying_signal_at = absl::InfiniteFuture();
  int stop_signal_number = SIGTERM;
  int hung_rank = -1;
  // After the diagnostic signal, the group is stopped at this time.
  absl::Time hang_stop_at = absl::InfiniteFuture();
  // After SIGKILL, workers still there at this time are checked for
  // uninterruptible sleep.
  absl::Time abandon_at = absl::InfiniteFuture();

  bool AllExited() const {
    return std::all_of(workers.begin(), workers.end(),
                       [](const Worker& w) { return w.exited; });
  }
};

namespace {

// How long workers may outlive SIGKILL before those in uninterruptible
// sleep (D) are given up on: SIGKILL takes effect once their I/O returns,
// which may be never (a dead NFS server, a wedged GPU driver).
constexpr absl::Duration kUnkillableWait = absl::Seconds(5);

// When the worker wrote its error file; nullopt if it has not (yet).
std::optional<absl::Time> ErrorRecordedAt(const std::string& path) {
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0 || st.st_size == 0) {
    return std::nullopt;
  }
  return absl::TimeFromTimespec(st.st_mtim);
}

// Picks the root cause among the workers that failed on their own. The
// first to exit is not always the first to fail: a rank that raises records
// its error, and its peers' "connection closed" errors, recorded after that,
// can reach the exit first while it is still unwinding. So when the first
// exit had recorded an error, the earliest record wins (torchrun's rule, by
// the file's time in nanoseconds rather than its whole seconds). A worker
// that died without a record (a signal, a crash) stays the root cause: it
// has no time of failure to compare but its exit.
WorkerExit RootCause(const std::vector<WorkerExit>& exits,
                     const WorkerExit& first_exit) {
  if (!first_exit.error_recorded.has_value()) return first_exit;
  const WorkerExit* earliest = &first_exit;
  for (const WorkerExit& e : exits) {
    if (e.exit_code == 0 || e.stopped_by_agent || !e.error_recorded) continue;
    if (*e.error_recorded < *earliest->error_recorded) earliest = &e;
  }
  return *earliest;
}

}  // namespace

Supervisor::Supervisor(const SupervisorOptions& options,
                       SignalSender send_signal)
    : options_(options),
      send_signal_(send_signal != nullptr ? std::move(send_signal)
                                          : SignalSender(::kill)),
      inherited_(InheritedSignalState::Capture()) {}

Supervisor::~Supervisor() {
  if (signal_fd_ >= 0) close(signal_fd_);
  if (event_fd_ >= 0) close(event_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

absl::StatusOr<std::unique_ptr<Supervisor>> Supervisor::Create(
    const SupervisorOptions& options, SignalSender send_signal) {
  std::unique_ptr<Supervisor> s(
      new Supervisor(options, std::move(send_signal)));
  // Block everything catchable, so every signal waits in the signalfd until
  // the loop reads it. SIGKILL/SIGSTOP cannot be blocked; synchronous
  // faults (SEGV, BUS, FPE, ILL) must not be, or a bug would hang the agent.
  const sigset_t all = AsyncSignals();
  if (sigprocmask(SIG_BLOCK, &all, nullptr) != 0) {
    return ErrnoError(errno, "sigprocmask(SIG_BLOCK)");
  }
  s->signal_fd_ = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
  if (s->signal_fd_ < 0) return ErrnoError(errno, "signalfd");
  s->event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->event_fd_ < 0) return ErrnoError(errno, "eventfd");
  s->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (s->epoll_fd_ < 0) return ErrnoError(errno, "epoll_create1");
  if (options.file_timer) {
    auto timer = FileTimerServer::Create(options.file_timer_path);
    if (!timer.ok()) return timer.status();
    s->file_timer_ = *std::move(timer);
    DJ_LOG_INFO("FileTimer: serving {} (TORCHELASTIC_TIMER_FILE)",
                options.file_timer_path);
  }
  std::vector<int> fds = {s->signal_fd_, s->event_fd_};
  if (s->file_timer_ != nullptr) fds.push_back(s->file_timer_->fd());
  for (int fd : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(s->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return ErrnoError(errno, "epoll_ctl(ADD)");
    }
  }
  if (access("/proc/self/stat", R_OK) != 0) {
    // The process tree is read from /proc: without it a process that left
    // its worker's process group (setsid) is invisible to the agent.
    DJ_LOG_WARNING(
        "/proc is not mounted: process-tree tracking is degraded; a process "
        "that leaves its worker's process group (setsid) is {}",
        getpid() == 1 ? "given no grace period: the kernel kills it when "
                        "the agent exits"
                      : "neither stopped nor waited for");
  }
  if (getpid() != 1) {
    // Before becoming a subreaper: the guard must not be re-parented to us.
    auto guard = TreeGuard::Start();
    if (guard.ok()) {
      s->guard_ = std::move(*guard);
    } else {
      DJ_LOG_WARNING(
          "{}: if the agent is killed with SIGKILL, its workers' children "
          "outlive it",
          guard.status().message());
    }
  }
  // As PID 1 the kernel re-parents orphans to us anyway; otherwise ask for
  // them, so no grandchild outlives the agent unreaped.
  if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    DJ_LOG_WARNING(
        "prctl(PR_SET_CHILD_SUBREAPER) failed: {}; orphans of "
        "workers will not be reaped by the agent",
        std::strerror(errno));
  }
  return s;
}

void Supervisor::Interrupt() {
  interrupted_ = true;
  const uint64_t one = 1;
  // Only EAGAIN can fail it (the counter is full): the loop is awake then.
  (void)!write(event_fd_, &one, sizeof(one));
}

void Supervisor::WaitForEvent(absl::Time deadline) {
  int timeout_ms = -1;
  if (deadline != absl::InfiniteFuture()) {
    const absl::Duration left = deadline - absl::Now();
    timeout_ms = left <= absl::ZeroDuration()
                     ? 0
                     : static_cast<int>(absl::ToInt64Milliseconds(
                           absl::Ceil(left, absl::Milliseconds(1))));
  }
  epoll_event events[4];
  const int n = epoll_wait(epoll_fd_, events, 4, timeout_ms);
  if (n < 0 && errno != EINTR) {
    DJ_LOG_ERROR("epoll_wait: {}", std::strerror(errno));
  }
  uint64_t drained;
  // Non-blocking: EAGAIN means nobody woke us, which is no error.
  (void)!read(event_fd_, &drained, sizeof(drained));
  // Drained on every wake, between attempts too: a readable FIFO left
  // unread would make every later epoll_wait return at once.
  if (file_timer_ != nullptr) file_timer_->ReadAvailable(absl::Now());
}

void Supervisor::SignalWorker(pid_t pid, int signal_number) {
  // The worker's process group: the worker and everything it started that
  // did not leave the group.
  if (send_signal_(-pid, signal_number) != 0 && errno == ESRCH) {
    send_signal_(pid, signal_number);
  }
}

std::vector<pid_t> Supervisor::Leftovers() const {
  std::vector<pid_t> left = ListDescendants(getpid());
  left.erase(
      std::remove_if(left.begin(), left.end(),
                     [this](pid_t pid) { return abandoned_.count(pid); }),
      left.end());
  return left;
}

void Supervisor::SignalLeftovers(int signal_number) {
  for (pid_t pid : Leftovers()) send_signal_(pid, signal_number);
}

std::vector<std::string> Supervisor::KillLeftovers() {
  std::vector<std::string> killed;
  for (pid_t pid : Leftovers()) {
    // Named before the signal: a killed process's comm is gone with it.
    std::string comm = std::string(absl::StripTrailingAsciiWhitespace(
        ReadSmallFile(absl::StrCat("/proc/", pid, "/comm"), 64)));
    // And the accelerators it holds: a straggler holding a GPU is what the
    // next attempt would have failed on, and the operator's question.
    DeviceFenceOptions devices;
    devices.proc_root = options_.proc_root;
    if (!options_.device_patterns.empty()) {
      devices.device_patterns = options_.device_patterns;
    }
    const std::vector<std::string> held = DevicesHeldBy(devices, pid);
    if (send_signal_(pid, SIGKILL) == 0) {
      killed.push_back(absl::StrCat("pid ", pid, " (", comm, ")",
                                    held.empty() ? "" : " holding ",
                                    absl::StrJoin(held, ", ")));
    }
  }
  return killed;
}

void Supervisor::ForwardSignal(Running* running, int signal_number) {
  for (Running::Worker& w : running->workers) {
    if (w.exited) continue;
    // Once stopping, whatever the agent sends may be what ends the worker.
    if (running->stopping) w.signalled = true;
    SignalWorker(w.pid, signal_number);
  }
}

void Supervisor::StopGroup(Running* running, absl::Time now) {
  if (running->stopping) return;
  // Evidence first: what the workers were doing is gone once they unwind.
  RecordEvidence(running, now, StopReason(*running), /*before_kill=*/false);
  now = absl::Now();
  running->stopping = true;
  if (on_group_running_) on_group_running_(false);
  running->kill_deadline =
      std::min(now + options_.shutdown_timeout, stop_deadline_);
  const int signal_number = stop_signal_ != 0 ? stop_signal_ : SIGTERM;
  running->stop_signal_number = signal_number;
  DJ_LOG_INFO("stopping the worker group: {} now, SIGKILL in {}",
              SignalName(signal_number),
              absl::FormatDuration(absl::Trunc(running->kill_deadline - now,
                                               absl::Milliseconds(100))));
  std::vector<int> dying;
  for (Running::Worker& w : running->workers) {
    if (w.exited) continue;
    // Signalled now, it would die of the agent's signal and not of its own
    // error: its exit code and the root cause would be lost.
    if (ErrorRecordedAt(w.error_file).has_value()) {
      dying.push_back(w.local_rank);
      continue;
    }
    w.signalled = true;
    SignalWorker(w.pid, signal_number);
    // A stopped worker (SIGSTOP, a debugger's detach) handles the signal
    // only once continued, as systemd does after its stop signal.
    send_signal_(-w.pid, SIGCONT);
  }
  if (!dying.empty()) {
    running->dying_signal_at =
        std::min(now + options_.exit_grace, running->kill_deadline);
    DJ_LOG_INFO(
        "worker local_rank(s) {} already recorded an error: {} to exit on "
        "their own",
        absl::StrJoin(dying, ","),
        absl::FormatDuration(running->dying_signal_at - now));
  }
}

void Supervisor::SignalDyingWorkers(Running* running) {
  running->dying_signal_at = absl::InfiniteFuture();
  ForwardSignal(running, running->stop_signal_number);
}

void Supervisor::HandleSignals(Running* running) {
  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      ReapChildren(running);
      continue;
    }
    if (sig == SIGPIPE && static_cast<pid_t>(info.ssi_pid) == getpid()) {
      // Raised by one of the agent's own writes (its log, a console copy)
      // to a reader that went away; the write's EPIPE already tells the
      // writer. Forwarded, it would end the workers for the agent's own
      // sink; logged, it would raise the next one, forever.
      continue;
    }
    const bool is_stop =
        std::find(options_.stop_signals.begin(), options_.stop_signals.end(),
                  sig) != options_.stop_signals.end();
    if (is_stop && stop_signal_ == 0) {
      // Only the first stop signal sets the deadline: a second one neither
      // resets nor extends it.
      stop_signal_ = sig;
      stop_deadline_ = absl::Now() + options_.shutdown_timeout;
      DJ_LOG_INFO("received {}: shutting down", SignalName(sig));
    } else {
      DJ_LOG_DEBUG("forwarding {}", SignalName(sig));
    }
    if (running != nullptr) {
      if (is_stop && !running->stopping) {
        StopGroup(running, absl::Now());
      } else {
        ForwardSignal(running, sig);
      }
    }
  }
  // Reap even when SIGCHLDs were coalesced with other signals.
  ReapChildren(running);
}

void Supervisor::ReapChildren(Running* running) {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    abandoned_.erase(pid);             // its I/O returned at last
    if (running == nullptr) continue;  // an orphan between attempts
    for (Running::Worker& w : running->workers) {
      if (w.pid != pid || w.exited) continue;
      w.exited = true;
      WorkerExit exit;
      exit.local_rank = w.local_rank;
      exit.pid = pid;
      exit.exit_code = ExitCodeFromWaitStatus(status);
      exit.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      exit.exec_errno = w.exec_errno;
      exit.stopped_by_agent = w.signalled;
      exit.time = absl::Now();
      if (exit.exit_code != 0) {
        exit.error_recorded = ErrorRecordedAt(w.error_file);
      }
      running->result.exits.push_back(exit);
      const bool is_hung =
          running->result.hang && w.local_rank == running->hung_rank;
      if ((is_hung || (exit.exit_code != 0 && !exit.stopped_by_agent)) &&
          !running->result.first_failure.has_value()) {
        running->result.first_failure = exit;
      }
      DJ_LOG_DEBUG("worker local_rank={} pid={} exited with {}", w.local_rank,
                   pid, exit.exit_code);
      if (file_timer_ != nullptr) file_timer_->table().DropPid(pid);
    }
  }
}

absl::StatusOr<GroupResult> Supervisor::RunGroup(
    const std::vector<WorkerSpec>& workers) {
  Running running;
  // Timers of the previous attempt's pids are dead with them.
  if (file_timer_ != nullptr) file_timer_->table().Clear();
  // interrupted_ is not cleared here: an Interrupt() that came after the
  // round formed but before the workers started (a fast peer already
  // opened the next round) must still stop this group.
  if (absl::Status started = StartWorkers(workers, &running); !started.ok()) {
    return started;
  }
  DJ_LOG_DEBUG("started {} workers", running.workers.size());
  SetGroupRunning(running, true);

  // A stop signal that arrived before the workers existed is not lost: it
  // is pending in the signalfd, or already recorded in stop_signal_.
  if (stop_signal_ != 0) {
    StopGroup(&running, absl::Now());
  } else if (on_group_running_) {
    on_group_running_(true);
  }
  for (;;) {
    HandleSignals(&running);
    const absl::Time now = absl::Now();
    if (interrupted_ && !running.stopping) StopGroup(&running, now);
    if (running.result.first_failure.has_value() && !running.stopping) {
      if (on_first_failure_) on_first_failure_();
      StopGroup(&running, now);
    }
    CheckHeartbeats(&running, now);
    CheckFileTimers(&running, now);
    if (now >= running.hang_stop_at && !running.stopping) {
      StopGroup(&running, now);
    }
    if (running.AllExited()) break;
    if (now >= running.dying_signal_at) SignalDyingWorkers(&running);
    if (running.stopping && !running.killed && now >= running.kill_deadline) {
      KillGroup(&running);
    }
    if (running.killed && now >= running.abandon_at &&
        AbandonUnkillable(&running, now)) {
      break;
    }
    WaitForEvent(NextWake(running));
  }
  running.result.last_activity = LastActivity();
  SetGroupRunning(running, false);
  // Whatever the workers left behind (in their process groups or escaped
  // with setsid) is stopped with the attempt, so the next attempt starts
  // clean; it gets the rest of the grace period to finish its own cleanup
  // before SIGKILL, as tini gives an orphan.
  DrainAttempt(&running);
  if (guard_ != nullptr) guard_->Clear();
  if (on_group_running_) on_group_running_(false);

  GroupResult result = std::move(running.result);
  if (result.first_failure.has_value() && !result.hang) {
    result.first_failure = RootCause(result.exits, *result.first_failure);
  }
  const bool interrupted = interrupted_.exchange(false);  // consumed
  if (stop_signal_ != 0) {
    result.outcome = GroupOutcome::kStopped;
  } else if (result.first_failure.has_value()) {
    result.outcome = GroupOutcome::kFailed;
  } else if (interrupted) {
    result.outcome = GroupOutcome::kInterrupted;
  } else {
    result.outcome = GroupOutcome::kSucceeded;
  }
  return result;
}

absl::Status Supervisor::StartWorkers(const std::vector<WorkerSpec>& workers,
                                      Running* running) {
  for (const WorkerSpec& spec : workers) {
    auto spawned = SpawnProcess(spec.process, inherited_);
    if (!spawned.ok()) {
      AbortStart(running);
      return spawned.status();
    }
    if (spawned->exec_errno != 0) {
      DJ_LOG_ERROR("cannot execute '{}' for local_rank {}: {}",
                   spec.process.argv[0], spec.local_rank,
                   std::strerror(spawned->exec_errno));
    }
    if (guard_ != nullptr) guard_->Add(spawned->pid);  // its process group
    Running::Worker worker;
    worker.local_rank = spec.local_rank;
    worker.pid = spawned->pid;
    worker.exec_errno = spawned->exec_errno;
    worker.heartbeat_file = spec.heartbeat_file;
    worker.error_file = spec.error_file;
    worker.server_socket = spec.server_socket;
    worker.started = absl::Now();
    running->workers.push_back(std::move(worker));
  }
  return absl::OkStatus();
}

void Supervisor::AbortStart(Running* running) {
  // Never leave a half-started group behind.
  StopGroup(running, absl::Now());
  running->kill_deadline = absl::Now();
  for (const auto& w : running->workers) send_signal_(-w.pid, SIGKILL);
  while (!running->AllExited()) {
    WaitForEvent(absl::Now() + absl::Milliseconds(100));
    HandleSignals(running);
  }
  if (guard_ != nullptr) guard_->Clear();
}

void Supervisor::KillGroup(Running* running) {
  RecordEvidence(running, absl::Now(), "the grace period ended",
                 /*before_kill=*/true);
  DJ_LOG_WARNING("grace period over: sending SIGKILL to the worker group");
  running->killed = true;
  running->abandon_at = absl::Now() + kUnkillableWait;
  ForwardSignal(running, SIGKILL);
  SignalLeftovers(SIGKILL);
}

absl::Time Supervisor::NextWake(const Running& running) const {
  absl::Time wake =
      running.stopping && !running.killed
          ? std::min(running.kill_deadline, running.dying_signal_at)
          : running.abandon_at;
  if (running.stopping) return wake;
  wake = std::min(wake, running.hang_stop_at);
  if (file_timer_ != nullptr) {
    wake = std::min(wake, file_timer_->table().NextExpiry());
  }
  for (size_t k = 0; k < running.workers.size(); ++k) {
    wake = std::min(wake, HeartbeatDeadline(running, k));
  }
  return wake;
}

absl::Time Supervisor::HeartbeatDeadline(const Running& running,
                                         size_t index) const {
  const Running::Worker& w = running.workers[index];
  if (options_.hang_timeout <= absl::ZeroDuration() || w.exited ||
      w.heartbeat_file.empty() || running.hung_rank >= 0) {
    return absl::InfiniteFuture();
  }
  struct stat st;
  if (stat(w.heartbeat_file.c_str(), &st) == 0) {
    return absl::TimeFromTimespec(st.st_mtim) + options_.hang_timeout;
  }
  const absl::Duration first =
      options_.first_heartbeat_timeout > absl::ZeroDuration()
          ? options_.first_heartbeat_timeout
          : 2 * options_.hang_timeout;
  return w.started + first;
}

void Supervisor::CheckHeartbeats(Running* running, absl::Time now) {
  if (running->stopping) return;
  for (size_t k = 0; k < running->workers.size(); ++k) {
    if (now < HeartbeatDeadline(*running, k)) continue;
    const Running::Worker& w = running->workers[k];
    DJ_LOG_ERROR(
        "worker local_rank={} (pid {}) made no progress: {} not "
        "refreshed in time; treating it as hung",
        w.local_rank, w.pid, w.heartbeat_file);
    // Evidence at the moment of the hang, before any signal changes it.
    RecordEvidence(
        running, now,
        absl::StrCat("local_rank ", w.local_rank, " hung: no heartbeat within ",
                     absl::FormatDuration(options_.hang_timeout)),
        /*before_kill=*/false);
    if (options_.hang_signal != 0) {
      // Give a stack dumper (py-spy, faulthandler) a moment first, in every
      // worker: where the others wait tells who they wait for. A stopped
      // worker is continued, or it could not dump (and the stop signal,
      // fatal to a stopped process, would end it first).
      for (const Running::Worker& other : running->workers) {
        if (other.exited) continue;
        send_signal_(-other.pid, options_.hang_signal);
        send_signal_(-other.pid, SIGCONT);
      }
    }
    DeclareHang(running, k, now, options_.hang_signal != 0);
    return;
  }
}

void Supervisor::DeclareHang(Running* running, size_t index, absl::Time now,
                             bool signalled) {
  running->hung_rank = running->workers[index].local_rank;
  running->result.hang = true;
  if (signalled) {
    // What the signal does (a dump, an exit) gets a moment before the stop.
    running->hang_stop_at =
        now + std::min(absl::Seconds(5), options_.shutdown_timeout);
  } else {
    StopGroup(running, now);
  }
}

int Supervisor::WorkerOwning(const Running& running, pid_t pid) const {
  for (size_t k = 0; k < running.workers.size(); ++k) {
    const Running::Worker& w = running.workers[k];
    if (w.exited) continue;
    if (w.pid == pid) return static_cast<int>(k);
    const std::vector<pid_t> below = ListDescendants(w.pid);
    if (std::find(below.begin(), below.end(), pid) != below.end()) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

void Supervisor::CheckFileTimers(Running* running, absl::Time now) {
  if (file_timer_ == nullptr || running->stopping) return;
  for (const ExpiredTimer& e : file_timer_->table().TakeExpired(now)) {
    const std::string late = absl::FormatDuration(
        absl::Trunc(now - e.expiration, absl::Milliseconds(1)));
    // Only the agent's own workers: a request naming any other pid must
    // not make the agent (often root, PID 1) signal it.
    const int index = WorkerOwning(*running, e.pid);
    if (index < 0) {
      DJ_LOG_WARNING(
          "FileTimer: scope {} of pid {} expired {} ago, but that pid is "
          "not a live worker process; its timers are dropped",
          QuoteForMessage(e.scope_id), e.pid, late);
      continue;
    }
    const int local_rank = running->workers[index].local_rank;
    if (e.signal <= 0) {
      // torch's rule: a timer without a signal is only told.
      DJ_LOG_WARNING(
          "FileTimer: scope {} of pid {} (local_rank {}) expired {} ago; "
          "it has no signal, so the worker is left running",
          QuoteForMessage(e.scope_id), e.pid, local_rank, late);
      continue;
    }
    DJ_LOG_ERROR(
        "FileTimer: scope {} of pid {} (local_rank {}) expired {} ago; "
        "sending {} and treating the worker as hung",
        QuoteForMessage(e.scope_id), e.pid, local_rank, late,
        SignalName(e.signal));
    // Evidence first: the timer's signal (SIGKILL by default) ends it.
    RecordEvidence(running, now,
                   absl::StrCat("FileTimer scope ", QuoteForMessage(e.scope_id),
                                " of local_rank ", local_rank, " expired"),
                   /*before_kill=*/false);
    if (send_signal_(e.pid, e.signal) != 0) {
      DJ_LOG_WARNING("FileTimer: kill({}, {}): {}", e.pid, e.signal,
                     std::strerror(errno));
    }
    if (running->hung_rank < 0) {
      DeclareHang(running, static_cast<size_t>(index), now, true);
    }
  }
}

std::string Supervisor::StopReason(const Running& running) const {
  if (stop_signal_ != 0) {
    return absl::StrCat("the agent received ", SignalName(stop_signal_));
  }
  if (running.hung_rank >= 0) {
    return absl::StrCat("local_rank ", running.hung_rank, " hung");
  }
  if (running.result.first_failure.has_value()) {
    return absl::StrCat("local_rank ", running.result.first_failure->local_rank,
                        " failed");
  }
  return "the group was interrupted (a peer's failure or a membership "
         "change)";
}

void Supervisor::RecordEvidence(Running* running, absl::Time now,
                                const std::string& reason, bool before_kill) {
  if (options_.evidence_budget <= absl::ZeroDuration()) return;
  std::vector<EvidenceTarget> targets;
  for (const Running::Worker& w : running->workers) {
    if (!w.exited) targets.push_back({w.local_rank, w.pid, w.server_socket});
  }
  if (targets.empty()) return;
  EvidenceOptions options;
  options.proc_root = options_.proc_root;
  options.budget = options_.evidence_budget;
  Evidence evidence = CollectEvidence(
      targets, reason, options, std::min(stop_deadline_, now + options.budget),
      /*ask_servers=*/!before_kill);
  DJ_LOG_WARNING(
      "evidence before {} ({}; {}):",
      before_kill ? "SIGKILL" : "stopping the workers", reason,
      absl::FormatDuration(absl::Trunc(evidence.took, absl::Milliseconds(1))));
  for (const std::string& line : SummarizeEvidence(evidence)) {
    DJ_LOG_WARNING("  {}", line);
  }
  running->result.evidence.push_back(std::move(evidence));
}

bool Supervisor::AbandonUnkillable(Running* running, absl::Time now) {
  bool waiting = false;
  for (Running::Worker& w : running->workers) {
    if (w.exited) continue;
    const ProcessStates states = ReadThreadStates(options_.proc_root, w.pid);
    if (!Unkillable(states)) {
      waiting = true;  // it is dying; SIGCHLD will tell
      continue;
    }
    DJ_LOG_ERROR(
        "worker local_rank={} (pid {}) is in uninterruptible sleep and "
        "outlived SIGKILL by {}: reported as unkillable, not waited for",
        w.local_rank, w.pid, absl::FormatDuration(kUnkillableWait));
    w.exited = true;
    abandoned_.insert(w.pid);
    running->result.unkillable.push_back(w.local_rank);
  }
  running->abandon_at = now + absl::Seconds(1);
  return !waiting;
}

void Supervisor::DrainAttempt(Running* running) {
  // An abandoned unkillable worker is not waited for here either: its
  // device files are the next attempt's fence's to wait for, bounded.
  if (Leftovers().empty()) return;
  if (!running->stopping) {
    // The workers exited on their own: their leftovers get the full grace
    // period, as dumb-init does after its child exits.
    running->stopping = true;
    running->kill_deadline =
        std::min(absl::Now() + options_.shutdown_timeout, stop_deadline_);
  }
  const int signal_number = stop_signal_ != 0 ? stop_signal_ : SIGTERM;
  if (!running->killed) {
    // Escaped processes never saw the group signal.
    SignalLeftovers(signal_number);
  }
  while (!running->killed && absl::Now() < running->kill_deadline &&
         !Leftovers().empty()) {
    WaitForEvent(
        std::min(running->kill_deadline, absl::Now() + absl::Milliseconds(20)));
    HandleSignals(running);
  }
  // Named one by one: a straggler that ignored the stop signal (a
  // DataLoader child, a daemon escaped with setsid) may be what held the
  // GPU, and its pid is what an operator greps the node for.
  if (const std::vector<std::string> killed = KillLeftovers();
      !killed.empty()) {
    DJ_LOG_WARNING(
        "killed the attempt's leftover process(es) still running at the "
        "deadline: {}",
        absl::StrJoin(killed, ", "));
  }
  // Reap them, so none is mistaken for a later attempt's worker.
  const absl::Time reap_deadline = absl::Now() + absl::Seconds(5);
  while (!Leftovers().empty() && absl::Now() < reap_deadline) {
    WaitForEvent(absl::Now() + absl::Milliseconds(20));
    HandleSignals(running);
  }
  HandleSignals(running);
}

void Supervisor::SetGroupRunning(const Running& running, bool is_running) {
  absl::MutexLock lock(&progress_mu_);
  group_running_ = is_running;
  group_started_ = absl::Now();
  heartbeat_files_.clear();
  if (!is_running) return;
  for (const Running::Worker& w : running.workers) {
    if (!w.heartbeat_file.empty()) heartbeat_files_.push_back(w.heartbeat_file);
  }
}

absl::Time Supervisor::LastActivity() const {
  absl::Time last = absl::InfinitePast();
  std::vector<std::string> files;
  {
    absl::MutexLock lock(&progress_mu_);
    files = heartbeat_files_;
  }
  if (file_timer_ != nullptr)
    last = std::max(last, file_timer_->last_request());
  for (const std::string& path : files) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      last = std::max(last, absl::TimeFromTimespec(st.st_mtim));
    }
  }
  return last;
}

ProgressSnapshot Supervisor::Progress() const {
  ProgressSnapshot snapshot;
  {
    absl::MutexLock lock(&progress_mu_);
    snapshot.running = group_running_;
    snapshot.last_progress = group_started_;
  }
  snapshot.last_progress = std::max(snapshot.last_progress, LastActivity());
  return snapshot;
}

int Supervisor::PollStopSignal() {
  HandleSignals(nullptr);
  return stop_signal_;
}

bool Supervisor::Sleep(absl::Duration duration) {
  const absl::Time until = absl::Now() + duration;
  while (stop_signal_ == 0 && !interrupted_ && absl::Now() < until) {
    WaitForEvent(until);
    HandleSignals(nullptr);
  }
  return stop_signal_ == 0;
}

void Supervisor::DrainDescendants() {
  HandleSignals(nullptr);
  if (Leftovers().empty()) return;
  const absl::Time deadline =
      std::min(absl::Now() + options_.shutdown_timeout, stop_deadline_);
  SignalLeftovers(SIGTERM);
  while (absl::Now() < deadline && !Leftovers().empty()) {
    WaitForEvent(std::min(deadline, absl::Now() + absl::Milliseconds(50)));
    HandleSignals(nullptr);
  }
  if (const std::vector<std::string> killed = KillLeftovers();
      !killed.empty()) {
    DJ_LOG_WARNING(
        "killed descendants still running after the grace period: {}",
        absl::StrJoin(killed, ", "));
  }
  // Reap what was killed; a process in D state may take a moment.
  const absl::Time reap_deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < reap_deadline) {
    HandleSignals(nullptr);
    int status;
    if (waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD) break;
    WaitForEvent(absl::Now() + absl::Milliseconds(50));
  }
}

}  // namespace distjob
