// The PID-1 side of the agent: runs one attempt of the local worker group
// and owns the whole process tree while it does.
//
// One thread, one epoll loop over a signalfd (every catchable signal is
// blocked and read from it, so none is lost while the agent is busy) and an
// eventfd (other threads ask the loop to interrupt the group). Orphans that
// the kernel re-parents to the agent (as PID 1, or as a child subreaper
// otherwise) are reaped on every SIGCHLD; only the workers' own pids count
// as worker exits.
#ifndef DISTJOB_SUPERVISOR_SUPERVISOR_H_
#define DISTJOB_SUPERVISOR_SUPERVISOR_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "supervisor/evidence.h"
#include "supervisor/file_timer.h"
#include "supervisor/process.h"
#include "supervisor/supervisor_options.h"
#include "supervisor/tree_guard.h"

namespace distjob {

struct WorkerSpec {
  int local_rank = 0;
  ProcessSpec process;
  // The file the worker touches to show progress (hang watchdog); the
  // agent removes it before the start.
  std::string heartbeat_file;
  // The worker's TORCHELASTIC_ERROR_FILE (empty: none): once written, the
  // worker has failed on its own and is exiting.
  std::string error_file;
  // The worker's TORCH_WORKER_SERVER_SOCKET (empty: none), asked for
  // evidence before the worker is stopped.
  std::string server_socket;
};

struct WorkerExit {
  int local_rank = 0;
  pid_t pid = -1;
  int exit_code = 0;              // exit status, or 128+signal
  int term_signal = 0;            // the signal that killed it, 0 if it exited
  int exec_errno = 0;             // exec failed: the worker never ran
  bool stopped_by_agent = false;  // it died after the agent told it to stop
  // When it wrote its error file; nullopt if it wrote none.
  std::optional<absl::Time> error_recorded;
  absl::Time time;
};

enum class GroupOutcome {
  kSucceeded,    // every worker exited 0
  kFailed,       // a worker failed; the others were stopped
  kStopped,      // a stop signal reached the agent; the group was stopped
  kInterrupted,  // Interrupt() was called; the group was stopped
};

struct GroupResult {
  GroupOutcome outcome = GroupOutcome::kSucceeded;
  std::vector<WorkerExit> exits;  // in order of exit
  // The root cause, if failed: of the workers that failed on their own
  // (not stopped by the agent), the first to record its error, as torchrun
  // picks it (a rank's exception comes before its peers' "connection
  // closed"), else the first to exit.
  std::optional<WorkerExit> first_failure;
  bool hang = false;  // the failure is a worker that stopped heartbeating
  // What the workers were doing before the agent stopped them, and again
  // before SIGKILL if some outlived the grace period: the attempt's
  // diagnostics (agent/diagnostics writes them).
  std::vector<Evidence> evidence;
  // Local ranks left in uninterruptible sleep after SIGKILL: not waited for.
  std::vector<int> unkillable;
  // The workers' last sign of progress (a heartbeat touch, a FileTimer
  // request), the group's start left out; InfinitePast if none was seen.
  // A FileTimer request of an earlier attempt may be older than the start.
  absl::Time last_activity = absl::InfinitePast();
};

// What the health endpoint (TORCHELASTIC_HEALTH_CHECK_PORT) reads: whether
// a group runs and the last sign of its progress (the group's start, a
// FileTimer request, a worker's heartbeat).
struct ProgressSnapshot {
  bool running = false;
  absl::Time last_progress = absl::InfinitePast();
};

// What the agent loop asks of the supervisor (agent/agent_loop.cc): the
// seam its unit tests replace with a scripted fake. The real one is
// Supervisor below; every method is its contract.
class SupervisorInterface {
 public:
  virtual ~SupervisorInterface() = default;

  // Starts the workers and supervises them until the group finishes. A
  // failed or interrupted group is stopped whole (SIGTERM to every worker's
  // process group, SIGKILL to all that remains after the grace period)
  // before this returns. Errors are failures to start a worker.
  virtual absl::StatusOr<GroupResult> RunGroup(
      const std::vector<WorkerSpec>& workers) = 0;

  // Waits for `duration` while reaping and watching for stop signals.
  // Returns false if a stop signal arrived (or had arrived before).
  virtual bool Sleep(absl::Duration duration) = 0;

  // Thread-safe: makes a running RunGroup stop the group and return
  // kInterrupted; with none running, the next RunGroup (which then stops
  // its group at once) or Sleep. The next RunGroup consumes it.
  virtual void Interrupt() = 0;

  // Drops an Interrupt() that no RunGroup consumed: it was meant for a
  // round the loop has already left.
  virtual void ClearInterrupt() = 0;

  // SIGTERM to every remaining descendant, wait up to the grace period while
  // reaping, then SIGKILL and reap. Called before the agent exits.
  virtual void DrainDescendants() = 0;

  // Called from the loop with true once every worker of an attempt has
  // started, and with false when the group starts stopping or has ended:
  // readiness follows it.
  virtual void set_on_group_running(std::function<void(bool)> callback) = 0;

  // Called (on the RunGroup thread) the moment a worker's failure is seen,
  // before its siblings are stopped: a multi-node job claims the failure in
  // the store while its peers' workers are still only losing connections.
  virtual void set_on_first_failure(std::function<void()> callback) = 0;

  // Handles the signals pending now (reaping, recording a stop signal)
  // without waiting, and returns stop_signal(). For long waits outside
  // RunGroup, such as DNS, that must end on a stop signal.
  virtual int PollStopSignal() = 0;

  // The first stop signal received, 0 if none.
  virtual int stop_signal() const = 0;

  // Thread-safe. Default: no group ever runs.
  virtual ProgressSnapshot Progress() const { return {}; }
};

// How the supervisor sends a signal, with kill(2)'s contract (a negative
// pid names a process group). The agent's is kill(2) itself; a unit test's
// double withholds SIGKILL from one worker, standing for a process in
// uninterruptible sleep, which no test can make.
using SignalSender = std::function<int(pid_t, int)>;

class Supervisor : public SupervisorInterface {
 public:
  // Blocks every catchable signal, opens the signalfd and, unless the agent
  // is PID 1, registers it as a child subreaper. Signals go through
  // `send_signal` (null: kill(2)).
  static absl::StatusOr<std::unique_ptr<Supervisor>> Create(
      const SupervisorOptions& options, SignalSender send_signal = nullptr);
  ~Supervisor() override;

  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  absl::StatusOr<GroupResult> RunGroup(
      const std::vector<WorkerSpec>& workers) override;
  bool Sleep(absl::Duration duration) override;
  void Interrupt() override;
  void ClearInterrupt() override { interrupted_ = false; }
  void DrainDescendants() override;
  void set_on_group_running(std::function<void(bool)> callback) override {
    on_group_running_ = std::move(callback);
  }
  void set_on_first_failure(std::function<void()> callback) override {
    on_first_failure_ = std::move(callback);
  }
  int PollStopSignal() override;
  int stop_signal() const override { return stop_signal_; }

  // Stats the running group's heartbeat files: from the health endpoint's
  // thread, so the supervision loop needs no timer to keep it fresh.
  ProgressSnapshot Progress() const override;

  const InheritedSignalState& inherited_signals() const { return inherited_; }

 private:
  Supervisor(const SupervisorOptions& options, SignalSender send_signal);

  struct Running;  // per-RunGroup state

  // `signal_number` to a worker's process group, else (the group is gone)
  // to the worker alone.
  void SignalWorker(pid_t pid, int signal_number);
  // The agent's live descendants but the abandoned unkillable ones.
  std::vector<pid_t> Leftovers() const;
  // `signal_number` to every leftover.
  void SignalLeftovers(int signal_number);
  // SIGKILL to every leftover; returns those killed, each named
  // "pid 123 (comm)" and, when it held device files, " holding <paths>"
  // (read from /proc before the kill: only these names are logged).
  std::vector<std::string> KillLeftovers();
  // Spawns every worker into `running`; a failure to start one kills and
  // reaps the ones started and is returned.
  absl::Status StartWorkers(const std::vector<WorkerSpec>& workers,
                            Running* running);
  // Starting a worker failed: the ones started are killed and reaped.
  void AbortStart(Running* running);
  // The grace period is over: evidence, then SIGKILL to everything left.
  void KillGroup(Running* running);
  // When RunGroup's loop must wake next if nothing happens before.
  absl::Time NextWake(const Running& running) const;

  // Reads pending signals; returns after handling what was read.
  void HandleSignals(Running* running);
  void ReapChildren(Running* running);
  // When a worker's heartbeat is due; InfiniteFuture without a watchdog.
  absl::Time HeartbeatDeadline(const Running& running, size_t index) const;
  // Declares a hang for the first worker past its deadline.
  void CheckHeartbeats(Running* running, absl::Time now);
  // Signals the pids whose FileTimer expired and declares the group hung.
  void CheckFileTimers(Running* running, absl::Time now);
  // The hang of worker `index`: when it was `signalled` (a stack dump, the
  // timer's signal) the group is stopped 5 s later (or at once when the
  // signal ended it), else at once.
  void DeclareHang(Running* running, size_t index, absl::Time now,
                   bool signalled);
  // The index of the live worker that is `pid` or its ancestor; -1 if none.
  int WorkerOwning(const Running& running, pid_t pid) const;
  // Evidence of the live workers before they are stopped (`before_kill`:
  // SIGKILL is due, so the kernel's view only), kept in the result and
  // summarised in the log.
  void RecordEvidence(Running* running, absl::Time now,
                      const std::string& reason, bool before_kill);
  // Why StopGroup stops the group, for the evidence.
  std::string StopReason(const Running& running) const;
  // After SIGKILL: workers still there in uninterruptible sleep are given
  // up on (reported, not waited for). True when none is left to wait for.
  bool AbandonUnkillable(Running* running, absl::Time now);
  void ForwardSignal(Running* running, int signal_number);
  // The stop signal to every live worker, but those that already recorded
  // their error get it exit_grace later.
  void StopGroup(Running* running, absl::Time now);
  void SignalDyingWorkers(Running* running);
  // After the workers exited: TERM what they left behind, wait for it up to
  // the deadline while reaping, then SIGKILL and reap.
  void DrainAttempt(Running* running);
  // The latest heartbeat mtime or FileTimer request: the workers' own
  // signs of progress, for Progress() and GroupResult::last_activity.
  absl::Time LastActivity() const;
  // What Progress() reads, as the group starts or ends.
  void SetGroupRunning(const Running& running, bool is_running);
  // epoll_wait until `deadline`; returns after an event or the deadline.
  void WaitForEvent(absl::Time deadline);

  SupervisorOptions options_;
  SignalSender send_signal_;
  InheritedSignalState inherited_;
  // Workers given up on in uninterruptible sleep, until they are reaped:
  // no later drain waits for them again.
  std::set<pid_t> abandoned_;
  int signal_fd_ = -1;
  int event_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_signal_ = 0;
  absl::Time stop_deadline_ = absl::InfiniteFuture();
  std::atomic<bool> interrupted_{false};
  std::function<void(bool)> on_group_running_;
  std::function<void()> on_first_failure_;
  // Not PID 1: kills the workers' groups if the agent dies unannounced.
  std::unique_ptr<TreeGuard> guard_;
  // Served while options_.file_timer_path is set; read in WaitForEvent.
  std::unique_ptr<FileTimerServer> file_timer_;
  // What Progress() reads, set as a group starts and ends; under
  // progress_mu_.
  mutable absl::Mutex progress_mu_;
  bool group_running_ = false;
  absl::Time group_started_;
  std::vector<std::string> heartbeat_files_;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_SUPERVISOR_H_
