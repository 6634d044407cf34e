#include "agent/agent_loop.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/barrier.h"
#include "agent/cli/torchrun_flags.h"
#include "agent/device_release.h"
#include "agent/diagnostics.h"
#include "agent/env_command.h"
#include "agent/exit_codes.h"
#include "agent/failure_report.h"
#include "agent/fd_needs.h"
#include "agent/fd_reserve.h"
#include "agent/health.h"
#include "agent/mpi_plan.h"
#include "agent/mpi_role.h"
#include "agent/observer.h"
#include "agent/outer_agent.h"
#include "agent/peer_failure.h"
#include "agent/report.h"
#include "agent/run_rendezvous.h"
#include "agent/stoppable_wait.h"
#include "agent/worker_env.h"
#include "agent/worker_group.h"
#include "agent/worker_store.h"
#include "common/console_writer.h"
#include "common/environment.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/text.h"
#include "launchers/worker_command.h"
#include "observability/trainer_status.h"
#include "rendezvous/protocol_version.h"
#include "rendezvous/rendezvous_kind.h"
#include "supervisor/cgroup_oom.h"
#include "supervisor/device_fence.h"
#include "supervisor/exit_policy.h"
#include "supervisor/progress_tracker.h"
#include "supervisor/supervisor.h"
#include "supervisor/worker_logs.h"

namespace distjob {
namespace {

// One `run`, from start-up to the exit code. Each step returns nullopt to
// go on, or the exit code to end with (the outcome already reported).
class AgentRun {
 public:
  AgentRun(const RunOptions& options, const EnvMap& env, AgentDeps deps)
      : options_(options), plan_(options), env_(env), deps_(std::move(deps)) {
    if (!deps_.make_supervisor) {
      deps_.make_supervisor = [](const SupervisorOptions& supervision)
          -> absl::StatusOr<std::unique_ptr<SupervisorInterface>> {
        auto supervisor = Supervisor::Create(supervision);
        if (!supervisor.ok()) return supervisor.status();
        return std::unique_ptr<SupervisorInterface>(*std::move(supervisor));
      };
    }
    if (!deps_.make_rendezvous) deps_.make_rendezvous = MakeRunRendezvous;
  }

  int Run() {
    HoldReservedFds();
    std::optional<int> code = Start();
    if (!code) code = Discover();
    int stop_signal = 0;  // an MPI role's, which reads its own signals
    if (!code && mpi_.role != MpiRole::kNone) {
      const RunReport mpi = RunMpiRole(plan_, env_, mpi_, health_.get());
      outcome_ = mpi.outcome;
      stop_signal = mpi.stop_signal;
      code = mpi.exit_code;
    }
    if (!code) code = PrepareRounds();
    if (!code) code = Finish(Supervise());
    handover_.reset();  // its thread uses the members below
    if (health_ != nullptr) health_->Shutdown();
    if (stop_signal == 0 && supervisor_)
      stop_signal = supervisor_->stop_signal();
    observer_.Exit(*code, outcome_, stop_signal);
    observer_.Shutdown();
    return *code;
  }

 private:
  // Supervision (signals are read from here on) and the health server:
  // both before discovery, so that a stop signal ends a DNS wait and the
  // pod answers its probes (and so becomes Ready, and resolvable by its
  // peers) while it waits for them.
  std::optional<int> Start() {
    auto supervisor = deps_.make_supervisor(plan_.supervisor);
    if (!supervisor.ok()) {
      DJ_LOG_ERROR("cannot set up supervision: {}", supervisor.status());
      return Fail("error", kExitInternalError);
    }
    supervisor_ = *std::move(supervisor);
    if (absl::Status observed = observer_.Start(plan_, supervisor_.get());
        !observed.ok()) {
      DJ_LOG_ERROR("{}", observed.message());
      return Fail("error", kExitBadConfig);
    }
    WarnOfUnwritableOutputs(plan_.outcome.termination_log,
                            plan_.outcome.error_file);
    // Before discovery or any worker: a bad URL or CA file is exit 2 now.
    if (absl::Status s = observer_.StartTrainerStatus(env_); !s.ok()) {
      DJ_LOG_ERROR("{}", s.message());
      return Fail("error", absl::IsInvalidArgument(s) ? kExitBadConfig
                                                      : kExitInternalError);
    }
    supervisor_->set_on_group_running([this](bool running) {
      if (handed_over_) return;  // the servers are the inner's now
      if (health_ != nullptr) health_->SetReady(running);
      observer_.GroupRunning(running, plan_.launch.nproc);
    });
    if (plan_.outcome.health_port != 0) {
      auto started = HealthServer::Start(
          plan_.outcome.health_port,
          plan_.outcome.health_tls ? &plan_.security : nullptr);
      if (!started.ok()) {
        DJ_LOG_ERROR("{}", started.status().message());
        return Fail("error", kExitBadConfig);
      }
      health_ = *std::move(started);
      DJ_LOG_INFO("health server on port {}", health_->port());
    }
    return std::nullopt;
  }

  // Identity, peers (DNS included) and the framework variables every worker
  // gets on top of the agent's env; then, once per job and not per
  // restart, the start barrier.
  std::optional<int> Discover() {
    auto stop_requested = [this] { return supervisor_->PollStopSignal() != 0; };
    const absl::Time resolving = absl::Now();
    auto job = ResolveJob(plan_.discovery, env_, stop_requested);
    if (!job.ok()) {
      if (supervisor_->stop_signal() != 0) {
        return Stopped(absl::IsCancelled(job.status())
                           ? std::string(job.status().message())
                           : "the peers' DNS names");
      }
      DJ_LOG_ERROR("{}", job.status().message());
      // The pod's status then names the missing peer or the bad input.
      return Fail("error", ExitCodeFor(job.status()),
                  std::string(job.status().message()));
    }
    // A generated variable (TF_CONFIG of a large cluster) past the
    // kernel's per-string limit would fail every worker's exec.
    if (absl::Status s = CheckExecStrings(job->extra.vars, "worker"); !s.ok()) {
      DJ_LOG_ERROR("{}", s.message());
      return Fail("error", kExitBadConfig, std::string(s.message()));
    }
    plan_.launch = EffectiveLaunch(*job, options_.launch);
    job_ = *job;
    if (std::optional<int> failed = PlanMpiRole()) return failed;
    if (mpi_.role != MpiRole::kNone) return std::nullopt;  // no barrier
    observer_.SetJob(plan_.launch.rdzv_id, plan_.launch.role,
                     plan_.launch.node_rank);
    observer_.PeersResolved(plan_.launch.max_nodes, absl::Now() - resolving);
    const BarrierPlan barrier = PlanBarrier(*job, plan_);
    if (!barrier.run) {
      if (job->has_identity) {
        DJ_LOG_DEBUG("no start barrier: {}", barrier.skip_reason);
      }
      return std::nullopt;
    }
    absl::Status passed = RunBarrier(barrier, stop_requested);
    if (passed.ok()) return std::nullopt;
    if (supervisor_->stop_signal() != 0) {
      return Stopped(absl::IsCancelled(passed) ? std::string(passed.message())
                                               : "the start barrier");
    }
    DJ_LOG_ERROR("{}", passed.message());
    const int code = ExitCodeFor(passed);
    return Fail(code == kExitRendezvousUnavailable ? "rendezvous" : "error",
                code);
  }

  // A Volcano MPI job's role, which only discovery (this pod's task) can
  // name: decided into `mpi_`, the parsed options left as they are.
  std::optional<int> PlanMpiRole() {
    auto mpi = PlanMpi(options_, job_, env_);
    if (!mpi.ok()) {
      DJ_LOG_ERROR("{}", mpi.status().message());
      return Fail("error", kExitBadConfig, std::string(mpi.status().message()));
    }
    mpi_ = *std::move(mpi);
    return std::nullopt;
  }

  // What every round needs: the rendezvous, the per-attempt files, the
  // output routing and the exit-code policy.
  std::optional<int> PrepareRounds() {
    if (WorkerStoreOnAgent(plan_.launch)) {
      // A TCPStore client cannot present the rendezvous token: with one,
      // an elastic round's store admits only its members
      // (docs/worker-store.md). Static and one-node jobs know no member list to
      // admit.
      const LaunchOptions& launch = plan_.launch;
      const bool elastic =
          ChooseRendezvous(launch.standalone, launch.max_nodes,
                           launch.rdzv_backend) == RendezvousKind::kDynamic;
      worker_store_ = std::make_shared<WorkerStore>(
          elastic && !plan_.security.token.empty(),
          NeedsOf(launch).worker_store_connections);
      observer_.WorkerStore([weak = std::weak_ptr<WorkerStore>(worker_store_)]()
                                -> std::optional<TcpStoreStats> {
        auto alive = weak.lock();
        if (alive == nullptr) return std::nullopt;
        return alive->Stats();
      });
    }
    auto rendezvous = deps_.make_rendezvous(plan_, worker_store_);
    if (!rendezvous.ok()) {
      DJ_LOG_ERROR("{}", rendezvous.status().message());
      return Fail("error", ExitCodeFor(rendezvous.status()));
    }
    rendezvous_ = *std::move(rendezvous);
    observer_.HostedStore(rendezvous_->HostedStoreStats());
    elastic_ = rendezvous_->AsElastic();
    if (elastic_ != nullptr) {
      // Membership changes are seen on the rendezvous' own thread; they
      // stop the running group so the loop re-rendezvouses.
      SupervisorInterface* supervisor = supervisor_.get();
      elastic_->SetOnMembershipChange([this, supervisor] {
        if (!handed_over_) supervisor->Interrupt();
      });
    }
    auto files = WorkerLogs::Create(RunLogDir(plan_.launch));
    if (!files.ok()) {
      DJ_LOG_ERROR("{}", files.status().message());
      return Fail("error", kExitBadConfig);
    }
    files_.emplace(*std::move(files));
    if (!files_->enabled()) {
      DJ_LOG_WARNING(
          "no writable temporary directory: workers get no "
          "TORCHELASTIC_ERROR_FILE and the hang watchdog is off");
    }
    redirects_ = plan_.launch.redirects;
    tees_ = plan_.launch.tees;
    if (!oom_counter_.path().has_value()) {
      DJ_LOG_DEBUG(
          "no cgroup OOM-kill counter found: OOM kills are not "
          "reported");
    }
    cause_policy_.policy = plan_.outcome.restart_policy.value_or(
        plan_.launch.as_torchrun ? RestartPolicy::kAny : RestartPolicy::kAuto);
    cause_policy_.permanent_exit_codes = plan_.outcome.permanent_exit_codes;
    cause_policy_.retryable_exit_codes = plan_.outcome.retryable_exit_codes;
    cause_policy_.retryable_patterns = plan_.outcome.retryable_error_patterns;
    auto server =
        HandoverServer::Start([this](pid_t pid) { return StepAside(pid); });
    if (server.ok()) {
      handover_ = *std::move(server);
    } else {
      DJ_LOG_WARNING("an agent started by the workers cannot take over: {}",
                     server.status().message());
    }
    return std::nullopt;
  }

  // An agent started below this one's worker asks this one to step aside
  // (docs/torchrun.md, "One launcher, always"). On the handover thread; the
  // main thread is in RunGroup, which the handover leaves running.
  HandoverReply StepAside(pid_t inner) {
    HandoverReply reply;
    const std::string outer =
        absl::StrCat("the outer distjob-agent (pid ", getpid(), ", running `",
                     absl::StrJoin(plan_.command, " "), "` with ",
                     plan_.launch.nproc, " worker(s) on this node)");
    if (plan_.launch.nproc != 1) {
      reply.refusal = absl::StrCat(
          "started by a worker of ", outer,
          ": each of its workers would start a launcher; run the "
          "launcher as the agent's only worker (--nproc-per-node 1), or "
          "run the training script under the outer agent without the "
          "inner launcher");
      return reply;
    }
    absl::MutexLock lock(&handover_mu_);
    if (!attempt_running_ && !handed_over_) {
      reply.refusal = absl::StrCat("started by a worker of ", outer,
                                   ", which is not running its worker now");
      return reply;
    }
    if (!handed_over_.exchange(true)) {
      inner_pid_ = inner;
      if (rendezvous_ != nullptr) rendezvous_->Abandon();
      if (worker_store_ != nullptr) worker_store_->Stop();
      if (health_ != nullptr) health_->Shutdown();
      observer_.Shutdown();
      DJ_LOG_INFO(
          "the launcher started by the worker (pid {}) takes over this "
          "job: this agent steps aside (its rendezvous, health and metrics "
          "servers are the inner launcher's now) and only supervises its "
          "worker",
          inner);
    }
    reply.agreed = true;
    reply.rdzv_key_suffix = "-inner";
    AddInheritedSettings(plan_, &reply);
    return reply;
  }

  // Whether a group runs (a handover is agreed only then); under the same
  // lock as StepAside, so a handover either precedes the group's end, seen
  // right after RunGroup, or is refused.
  void SetAttemptRunning(bool running) {
    absl::MutexLock lock(&handover_mu_);
    attempt_running_ = running;
  }

  // The end of a run whose worker's launcher took over: the worker's own
  // exit code, no restart, nothing announced to the other nodes. A store
  // this agent hosts serves the inner launchers' rounds: it stays up until
  // their connections close (bounded).
  int HandedOverExit(const GroupResult& group) {
    int code = kExitSuccess;
    if (group.outcome == GroupOutcome::kFailed) {
      code = group.first_failure->exit_code;
    } else if (group.outcome != GroupOutcome::kSucceeded) {
      code = ExitCodeForSignal(supervisor_->stop_signal() != 0
                                   ? supervisor_->stop_signal()
                                   : SIGTERM);
    }
    const Rendezvous::StoreStatsSource stats = rendezvous_->HostedStoreStats();
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (stats != nullptr && supervisor_->stop_signal() == 0 &&
           absl::Now() < until) {
      const std::optional<StoreStats> now = stats();
      if (!now.has_value() || now->connections == 0) break;
      DJ_LOG_DEBUG("{} connection(s) to the store still open",
                   now->connections);
      if (!supervisor_->Sleep(absl::Milliseconds(200))) break;
    }
    Ended(code == 0     ? "success"
          : code >= 128 ? "retryable"
                        : "permanent",
          code);
    report_.detail =
        absl::StrCat("handed over to the launcher its worker started (pid ",
                     inner_pid_.load(), "), which exited with ", code);
    // The inner agent wrote its own message (the root cause) where this
    // one would: it is kept, with the handover said after it.
    const std::string path = plan_.outcome.termination_log;
    const std::string inner_message =
        path.empty() ? std::string() : ReadSmallFile(path, 2 * 4096);
    if (!inner_message.empty()) {
      // Best effort, as on every exit: a path that cannot be written is
      // skipped (the same message goes to the log).
      (void)WriteTerminationMessage(
          path, absl::StrCat(
                    Utf8Truncate(inner_message, kTerminationMessageLimit -
                                                    report_.detail.size() - 1),
                    "\n", report_.detail));
      inner_message_kept_ = true;
    }
    return code;
  }

  // What one attempt leaves for the decision after its group ended.
  struct Attempt {
    // The cgroup's OOM-kill counter before the workers started.
    std::optional<int64_t> ooms_before;
    // The failure claim made the moment the group's first failure was
    // seen, if it was (elastic jobs).
    std::optional<bool> first_to_fail;
    bool oom = false;
    // The communication error another node offered beside this node's
    // failure (AwaitPeerVerdict), for the repeat check.
    std::optional<FailureReport> collateral;
  };

  // Rounds and attempts until the job ends; returns the exit code with
  // report_ describing it.
  int Supervise() {
    absl::Duration backoff = plan_.outcome.restart_backoff;
    // This node's own failure, left to the job's decision (another node's
    // worker failed first, or the membership changed).
    std::optional<FailureReport> deferred;
    for (;;) {
      RendezvousResult round;
      if (std::optional<int> code = NextRound(&deferred, &round)) return *code;
      Attempt attempt;
      std::optional<GroupResult> group;
      if (std::optional<int> code = RunAttempt(round, &attempt, &group)) {
        return *code;
      }
      if (handed_over_) return HandedOverExit(*group);
      ObserveGroupEnd(*group, &attempt);
      switch (group->outcome) {
        case GroupOutcome::kSucceeded:
          return Ended("success", kExitSuccess);
        case GroupOutcome::kStopped:
          return Ended("stopped",
                       ExitCodeForSignal(supervisor_->stop_signal()));
        case GroupOutcome::kInterrupted:
          observer_.MembershipChange();
          continue;  // a membership change: the next round, no restart
        case GroupOutcome::kFailed:
          progress_.AttemptFailed(group->last_activity);
          break;
      }
      FailureReport failure = Examine(*group, attempt.oom, round.base_rank);
      // A fixed round (standalone, static) has no peers to defer to: this
      // node's failure is the job's, decided here.
      if (elastic_ != nullptr) {
        switch (ElasticFailure(*group, &attempt, &failure, &deferred)) {
          case FailureStep::kStopped:
            return Ended("stopped",
                         ExitCodeForSignal(supervisor_->stop_signal()));
          case FailureStep::kNextRound:
            continue;
          case FailureStep::kDecide:
            break;
        }
      }
      if (!RecordFailure(failure, attempt, group->hang)) {
        return report_.exit_code;
      }
      if (std::optional<int> stopped = Restart(*group, attempt.oom, &backoff)) {
        return *stopped;
      }
    }
  }

  // Joins the next round into `*round`; returns the exit code when there
  // is none (a stop signal, or the rendezvous failed or ended the job).
  std::optional<int> NextRound(std::optional<FailureReport>* deferred,
                               RendezvousResult* round) {
    // An interrupt no group consumed was meant for the round just left.
    supervisor_->ClearInterrupt();
    const absl::Time joined = absl::Now();
    absl::StatusOr<RendezvousResult> next =
        absl::UnknownError("the rendezvous did not run");
    const std::string stopped_while =
        WhileStoppable([&] { next = rendezvous_->Next(plan_.launch.nproc); },
                       absl::ZeroDuration(), "the rendezvous round");
    // Also when the round closed after the signal: no worker is started
    // only to be stopped.
    if (supervisor_->PollStopSignal() != 0) {
      Ended("stopped", ExitCodeForSignal(supervisor_->stop_signal()));
      report_.detail =
          stopped_while.empty()
              ? absl::StrCat(
                    StoppedWhileWaiting(supervisor_->stop_signal(), ""),
                    " as the rendezvous round closed, before the "
                    "workers started")
              : StoppedWhileWaiting(supervisor_->stop_signal(), stopped_while);
      return report_.exit_code;
    }
    if (!next.ok() && deferred->has_value() && absl::IsAborted(next.status())) {
      // Another node ended the job while this node's workers were failing
      // too: this pod's status tells its own failure (the raising rank's
      // traceback), not only that a peer ended the job.
      DJ_LOG_ERROR("rendezvous ended: {}", next.status());
      return FollowEndedJob(**deferred, next.status().message());
    }
    deferred->reset();
    if (!next.ok()) return RendezvousFailed(next.status());
    *round = *std::move(next);
    restart_count_ = std::max(restart_count_, round->restart_count);
    observer_.Attempt(restart_count_);
    observer_.RoundClosed(*round, absl::Now() - joined);
    return std::nullopt;
  }

  // The end of the job when the rendezvous fails; returns the exit code.
  int RendezvousFailed(const absl::Status& status) {
    DJ_LOG_ERROR("rendezvous failed: {}", status);
    // A token the store refuses is this pod's configuration: a new pod
    // with the same Secret would be refused again; so is a binary whose
    // rendezvous protocol is not the job's.
    // Another node ended the job for want of progress: so does this
    // one, with the same code (every node stops, none is requeued).
    const bool no_progress =
        absl::IsAborted(status) &&
        EndedJobExitCode(status.message()) == kExitNoProgress;
    const int code =
        no_progress ? kExitNoProgress
        : absl::IsUnauthenticated(status) || IsRdzvProtocolMismatch(status)
            ? kExitBadConfig
            : kExitRendezvousUnavailable;
    Ended(no_progress ? "permanent" : "rendezvous", code);
    report_.detail = std::string(status.message());
    return code;
  }

  // The workers of `round`, each told where an agent it starts asks this
  // one to step aside and marked for the GPU-release fence.
  std::vector<WorkerSpec> AttemptWorkers(const RendezvousResult& round) {
    std::vector<WorkerSpec> workers = BuildWorkers(
        plan_, env_, job_, round, restart_count_, *files_, redirects_, tees_,
        observer_.trainer_status() != nullptr
            ? observer_.trainer_status()->progress_file()
            : std::string());
    for (WorkerSpec& w : workers) {
      // An agent the worker starts asks this one to step aside there.
      if (handover_ != nullptr) {
        w.process.env[kOuterAgentVariable] = handover_->path();
      }
      w.process.env[kDeviceFenceVariable] =
          fence_marker_.substr(fence_marker_.find('=') + 1);
    }
    return workers;
  }

  // Starts the workers of `round` and supervises them until the group
  // ends, into `*group`; returns the exit code when the attempt could not
  // run (a device still held, the workers not started).
  std::optional<int> RunAttempt(const RendezvousResult& round, Attempt* attempt,
                                std::optional<GroupResult>* group) {
    if (absl::Status made =
            files_->PrepareAttempt(restart_count_, plan_.launch.nproc);
        !made.ok()) {
      DJ_LOG_WARNING("worker error files unavailable: {}", made);
    }
    attempt->ooms_before = oom_counter_.Read();
    if (elastic_ != nullptr) {
      supervisor_->set_on_first_failure([this, attempt] {
        if (handed_over_) return;  // the inner launcher's rendezvous
        attempt->first_to_fail = elastic_->ClaimFailure();
      });
    }
    std::vector<WorkerSpec> workers = AttemptWorkers(round);
    if (attempts_++ > 0) {
      if (auto held =
              ReleaseDevices(plan_.outcome, plan_.supervisor.device_patterns,
                             fence_marker_, supervisor_.get())) {
        Ended("retryable", kExitRetryElsewhere);
        report_.detail = *held;
        return report_.exit_code;
      }
    }
    progress_.AttemptStarted(absl::Now());
    SetAttemptRunning(true);
    auto ran = supervisor_->RunGroup(std::move(workers));
    SetAttemptRunning(false);
    supervisor_->set_on_first_failure(nullptr);
    files_->FinishAttempt();
    if (!ran.ok()) {
      DJ_LOG_ERROR("cannot start the workers: {}", ran.status());
      if (restart_count_ > 0 && report_.root_cause.has_value()) {
        return RestartNotStarted(ran.status());
      }
      return Ended("error", kExitInternalError);
    }
    const std::string path = RecordDiagnostics(*ran, &*files_, restart_count_,
                                               plan_.launch.nproc, &observer_);
    if (!path.empty()) diagnostics_ = path;
    group->emplace(*std::move(ran));
    return std::nullopt;
  }

  // The group's end as the metrics and the log see it: an OOM kill (into
  // attempt->oom), a hang, the outcome.
  void ObserveGroupEnd(const GroupResult& group, Attempt* attempt) {
    const std::optional<int64_t> ooms_after = oom_counter_.Read();
    // Only a rise of the cgroup's counter is an OOM kill: a SIGKILL from
    // the agent's grace period or from `kill -9` leaves it unchanged.
    const std::optional<int64_t>& ooms_before = attempt->ooms_before;
    attempt->oom = ooms_before.has_value() && ooms_after.has_value() &&
                   *ooms_after > *ooms_before;
    if (attempt->oom) {
      DJ_LOG_WARNING(
          "the kernel's OOM killer ended {} process(es) of the worker "
          "group ({})",
          *ooms_after - *ooms_before, *oom_counter_.path());
      observer_.Oom(*ooms_after - *ooms_before);
    }
    if (group.hang) observer_.Hang();
    observer_.GroupExited(group.outcome);
  }

  // Counts the restart after a failure `group` and waits out `*backoff`;
  // returns the exit code when a stop signal ends the job instead.
  std::optional<int> Restart(const GroupResult& group, bool oom,
                             absl::Duration* backoff) {
    ++restart_count_;
    observer_.Restart(group.hang ? "hang"
                      : oom      ? "oom"
                                 : "retryable_exit",
                      restart_count_);
    if (elastic_ != nullptr) elastic_->NoteFailureRestart(restart_count_);
    return PauseBeforeRestart(backoff);
  }

  enum class FailureStep { kDecide, kNextRound, kStopped };

  // An elastic job's node after its group failed with `*failure`: whether
  // this node decides on `*failure` (which may become a failure another
  // node offered), follows the next round (its own failure then kept in
  // `*deferred`, or a consequence of a lost peer), or was stopped.
  // `attempt->first_to_fail`: the claim made the moment the failure was
  // seen, if it was (a hang is seen later: claimed here).
  FailureStep ElasticFailure(const GroupResult& group, Attempt* attempt,
                             FailureReport* failure,
                             std::optional<FailureReport>* deferred) {
    if (elastic_->MembershipChanged()) {
      // The failure follows a peer loss the agent saw: part of that change.
      DJ_LOG_INFO("worker failure after a membership change; re-forming");
      *deferred = std::move(*failure);
      return FailureStep::kNextRound;
    }
    if (!(attempt->first_to_fail.has_value() ? *attempt->first_to_fail
                                             : elastic_->ClaimFailure())) {
      DJ_LOG_INFO(
          "worker local_rank={} failed after another node's: following "
          "that node's decision",
          group.first_failure->local_rank);
      // That node may have claimed the round with this failure's
      // collateral (its gloo peers saw this worker's sockets close): the
      // failure is offered as the root cause, or beside it when it is such
      // an error itself.
      elastic_->OfferFailure(failure->cause.peer_communication
                                 ? OfferedFailureKind::kCommunication
                                 : OfferedFailureKind::kRootCause,
                             EncodeOfferedFailure(*failure));
      *deferred = std::move(*failure);
      return FailureStep::kNextRound;
    }
    if (!failure->cause.peer_communication) return FailureStep::kDecide;
    PeerVerdict verdict = AwaitPeerVerdict(
        *elastic_, *failure,
        [this](absl::Duration d) { return supervisor_->Sleep(d); });
    switch (verdict.kind) {
      case PeerVerdict::Kind::kStopped:
        return FailureStep::kStopped;
      case PeerVerdict::Kind::kPeerLost:
        observer_.MembershipChange();
        return FailureStep::kNextRound;  // a consequence: no restart
      case PeerVerdict::Kind::kPeerFailed:
        *failure = std::move(verdict.peer_failure);
        break;
      case PeerVerdict::Kind::kOwn:
        attempt->collateral = std::move(verdict.collateral);
        break;
    }
    return FailureStep::kDecide;
  }

  // The pause before restart restart_count_, `*backoff` long and doubled
  // for the next one up to the maximum. Returns the exit code when a stop
  // signal ends the job instead (during the pause or before it).
  std::optional<int> PauseBeforeRestart(absl::Duration* backoff) {
    if (*backoff > absl::ZeroDuration()) {
      DJ_LOG_INFO("restarting the worker group ({}/{}) in {}", restart_count_,
                  plan_.launch.max_restarts, absl::FormatDuration(*backoff));
      // A stop signal during the pause ends the job: no further attempt.
      if (!supervisor_->Sleep(*backoff)) {
        Ended("stopped", ExitCodeForSignal(supervisor_->stop_signal()));
        report_.detail = StoppedWhileWaiting(
            supervisor_->stop_signal(),
            absl::StrCat("the restart backoff (",
                         absl::FormatDuration(*backoff), " before restart ",
                         restart_count_, "/", plan_.launch.max_restarts, ")"));
        return report_.exit_code;
      }
      *backoff = std::min(*backoff * 2, plan_.outcome.restart_backoff_max);
    } else {
      DJ_LOG_INFO("restarting the worker group ({}/{})", restart_count_,
                  plan_.launch.max_restarts);
    }
    if (supervisor_->stop_signal() != 0) {
      return Ended("stopped", ExitCodeForSignal(supervisor_->stop_signal()));
    }
    return std::nullopt;
  }

  // The failure of `group` as the restart policy reads it.
  FailureReport Examine(const GroupResult& group, bool oom, int base_rank) {
    int exit_code = group.first_failure->exit_code;
    // A hung worker may exit 0 on SIGTERM: it still failed, retryably.
    if (group.hang && exit_code == 0) exit_code = ExitCodeForSignal(SIGTERM);
    FailureReport failure =
        ExamineFailure(group, exit_code, oom, *files_, restart_count_,
                       base_rank, cause_policy_);
    failure.hint =
        InterpreterHint(failure.cause.exception.line,
                        Lookup(env_, "PYTHON_EXEC").value_or("python3"));
    return failure;
  }

  // The failure of a decision on `own` that repeats the job's last root
  // cause (auto only), or nullptr: the same rank, exception and message
  // again is deterministic. `collateral` counts too (Attempt::collateral).
  const FailureReport* Repeated(
      const FailureReport& own,
      const std::optional<FailureReport>& collateral) {
    if (cause_policy_.policy != RestartPolicy::kAuto) return nullptr;
    const std::string record = RootCauseRecord(own, collateral);
    const std::string previous = elastic_ != nullptr
                                     ? elastic_->SwapRootCause(record)
                                     : std::exchange(last_signature_, record);
    return RepeatOf(previous, own, collateral);
  }

  // Decides on a failure this node owns, into report_; returns whether to
  // restart. A repeated communication error another node offered is the
  // failure decided on: the deterministic one.
  bool RecordFailure(const FailureReport& own, const Attempt& attempt,
                     bool hang) {
    const bool oom = attempt.oom;
    const FailureReport* repeated = Repeated(own, attempt.collateral);
    const FailureReport& failure = repeated != nullptr ? *repeated : own;
    const int worker_code = failure.exit_code;
    bool restart = failure.cause.restart;
    const bool budget_left = restart_count_ < plan_.launch.max_restarts;
    std::string outcome;
    int code = worker_code;
    if (restart && repeated != nullptr) {
      restart = false;
      outcome =
          "the same root cause as the failure before it: not restarting (a "
          "deterministic failure)";
      if (code >= 128 || code <= 0) code = 1;
    } else if (restart && progress_.Exhausted()) {
      restart = false;
      outcome = absl::StrCat(progress_.Describe(), ": not restarting");
      code = kExitNoProgress;
    } else if (restart && budget_left) {
      outcome = absl::StrCat("restarting (", restart_count_ + 1, "/",
                             plan_.launch.max_restarts, ")");
    } else if (restart) {
      outcome =
          absl::StrCat("restartable, but the job's restarts are spent (",
                       restart_count_, "/", plan_.launch.max_restarts, ")");
      // Infrastructure: another pod may succeed (the operator's retry).
      if (cause_policy_.policy == RestartPolicy::kAuto &&
          failure.cause.infrastructure && code < 128) {
        code = kExitRetryElsewhere;
      }
    } else {
      outcome = cause_policy_.policy == RestartPolicy::kAuto
                    ? "not restarting (--restart-policy any restarts every "
                      "failure, as torchrun)"
                    : "not restarting";
    }
    const std::string decision = DecisionLine(failure, outcome);
    DJ_LOG_ERROR("{}", decision);
    if (!failure.hint.empty()) DJ_LOG_ERROR("{}", failure.hint);
    // The class the policy gave the failure (an exit-code override
    // included), as the exit-code table reads a code it did not override.
    const std::string class_name =
        code >= 128 || restart ? "retryable" : "permanent";
    observer_.WorkerFailed(failure.exit, code, class_name);
    // The outcome the operator reads is the class of the code returned: a
    // restartable failure whose restarts are spent exits with its code,
    // and a code of 1-127 is permanent unless --retryable-exit-codes
    // names it, whatever the cause table thought.
    const bool code_retryable =
        code >= 128 || cause_policy_.retryable_exit_codes.count(code) > 0;
    Ended(failure.exit.exec_errno != 0 ? "exec-failed"
          : code_retryable             ? "retryable"
                                       : "permanent",
          code);
    report_.oom = oom;
    report_.hang = hang;
    report_.root_cause = MakeRootCause(failure, decision);
    if (oom && failure.exit.term_signal == SIGKILL &&
        report_.root_cause->reason.empty()) {
      report_.root_cause->reason = "killed by the kernel's OOM killer";
    }
    return restart && budget_left;
  }

  // This node's workers failed after another node's did, and that node
  // ended the job (`why`): this node exits as the job's root cause says
  // (its code), and its report names its own failure too.
  int FollowEndedJob(const FailureReport& own, absl::string_view why) {
    const int code = EndedJobExitCode(why).value_or(
        own.exit.exit_code > 0 ? own.exit.exit_code : kExitRetryElsewhere);
    DJ_LOG_INFO("{}", DecisionLine(own, "the job already ended"));
    Ended(code >= 128 ? "retryable" : "permanent", code);
    report_.root_cause = MakeRootCause(own, "the job already ended");
    report_.detail = std::string(why);
    return code;
  }

  RootCause MakeRootCause(const FailureReport& failure,
                          const std::string& decision) const {
    RootCause cause = distjob::MakeRootCause(
        failure.exit, *files_, restart_count_,
        plan_.command.empty() ? std::string() : plan_.command[0]);
    cause.rank = failure.rank;
    cause.host = failure.host;
    cause.exception = failure.cause.exception.line;
    cause.traceback = failure.cause.exception.excerpt;
    cause.decision = decision;
    cause.logs = failure.logs;
    // Another node's worker: its error file is on that node, its text here.
    if (failure.from_peer) cause.error_file.clear();
    if (!failure.hint.empty()) cause.reason = failure.hint;
    return cause;
  }

  // Leaves the rendezvous, lets every descendant go, reports.
  int Finish(int exit_code) {
    if (exit_code != 0) rendezvous_->SetEndReason(EndReason(report_));
    // A stop signal ends the exit barrier and the host's waits for the
    // others; one received before leaves a moment to tell the others.
    const bool stopped_before = supervisor_->stop_signal() != 0;
    const std::string stopped_while = WhileStoppable(
        [&] { rendezvous_->Shutdown(exit_code == 0); }, absl::Milliseconds(500),
        exit_code == 0 ? "the exit barrier" : "the other nodes");
    supervisor_->DrainDescendants();
    if (supervisor_->stop_signal() != 0 && exit_code == 0) {
      exit_code = ExitCodeForSignal(supervisor_->stop_signal());
      report_.outcome = "stopped";
      outcome_ = "stopped";
      report_.exit_code = exit_code;
      report_.detail =
          StoppedWhileWaiting(supervisor_->stop_signal(), stopped_while);
    } else if (!stopped_before && !stopped_while.empty()) {
      // The job had already ended otherwise: its code and cause stay, and
      // the message says where the signal cut the ending short.
      const std::string line =
          StoppedWhileWaiting(supervisor_->stop_signal(), stopped_while);
      report_.detail =
          report_.detail.empty() ? line : report_.detail + "\n" + line;
    }
    report_.stop_signal = supervisor_->stop_signal();
    report_.diagnostics = diagnostics_;
    if (exit_code != 0) ShowRootCause();
    Publish(report_);
    return exit_code;
  }

  // A failed job's console ends with its root cause, whatever
  // --local-ranks-filter hid: this node's failed worker, or what the node
  // that ended the job said. The failed attempt's files stay.
  void ShowRootCause() {
    std::string block;
    if (report_.root_cause.has_value() &&
        report_.root_cause->decision != "the job already ended") {
      block = FormatRootCauseBlock(*report_.root_cause);
    } else if (absl::StartsWith(report_.detail, "the job ended: ")) {
      block = absl::StrCat("=== distjob-agent: root cause (", report_.detail,
                           ") ===\n=================================\n");
    }
    if (files_.has_value() && report_.root_cause.has_value()) files_->Keep();
    if (!block.empty()) ConsoleWriter::Stderr().Write(block);
  }

  // The restart after a retryable failure (report_) could not start its
  // workers (descriptors or processes ran out): the job still ends with
  // that failure, as when no restart is left, not as the agent's own 70.
  int RestartNotStarted(const absl::Status& why) {
    const int code =
        report_.exit_code >= 128 ? report_.exit_code : kExitRetryElsewhere;
    outcome_ = "retryable";
    report_.outcome = outcome_;
    report_.exit_code = code;
    report_.detail = absl::StrCat("the restart could not start the workers: ",
                                  why.message());
    return code;
  }

  // Sets report_ for an ending of the loop; returns `exit_code`.
  int Ended(const std::string& outcome, int exit_code) {
    outcome_ = outcome;
    report_ = MakeRunReport(outcome, exit_code, restart_count_,
                            plan_.launch.max_restarts);
    return exit_code;
  }

  // An ending before any round: report it and return `exit_code`.
  int Fail(const std::string& outcome, int exit_code,
           const std::string& detail = "") {
    RunReport report =
        MakeRunReport(outcome, exit_code, 0, plan_.launch.max_restarts);
    outcome_ = outcome;
    report.detail = detail;
    Publish(report);
    return exit_code;
  }

  // Runs `wait` (a rendezvous call that may wait for the other nodes) on
  // its own thread while this one reads the stop signals; a stop signal
  // cancels the rendezvous `grace` after it is read (a signal received
  // before counts from the start). Returns what the rendezvous waited for
  // when it was cancelled (`fallback` if it did not say), else "".
  std::string WhileStoppable(const std::function<void()>& wait,
                             absl::Duration grace,
                             const std::string& fallback) {
    std::string waiting_for;
    StoppableWait stoppable;
    stoppable.what = fallback;
    stoppable.step = wait;
    stoppable.stop = [this] { return supervisor_->PollStopSignal() != 0; };
    stoppable.grace = grace;
    // No silent wait: every interval, what the rendezvous still awaits.
    stoppable.progress = [this] { return rendezvous_->WaitProgress(); };
    stoppable.cancel = [&] {
      waiting_for = rendezvous_->WaitingFor();
      if (waiting_for.empty()) waiting_for = fallback;
      rendezvous_->Cancel();
    };
    RunStoppable(stoppable);
    return waiting_for;
  }

  // An ending by a stop signal before any round; `waiting`: what the agent
  // was waiting for (see StoppedWhileWaiting).
  int Stopped(const std::string& waiting) {
    RunReport report =
        MakeRunReport("stopped", ExitCodeForSignal(supervisor_->stop_signal()),
                      0, plan_.launch.max_restarts);
    report.stop_signal = supervisor_->stop_signal();
    report.detail = StoppedWhileWaiting(report.stop_signal, waiting);
    outcome_ = "stopped";
    Publish(report);
    return report.exit_code;
  }

  // Tells `report` in the plan's outcome files, less a termination log
  // the inner launcher wrote, with the descriptors kept for them
  // (agent/fd_reserve.h) whatever filled the table.
  void Publish(const RunReport& report) const {
    ReleaseReservedFds();
    PublishReport(report,
                  inner_message_kept_ ? "" : plan_.outcome.termination_log,
                  plan_.outcome.error_file);
  }

  // The options as parsed, never written; the plan every step follows, with
  // what discovery found applied (EffectiveLaunch) once it is done.
  const RunOptions options_;
  RunOptions plan_;
  EnvMap env_;   // the agent's env
  JobEnv job_;   // what discovery found
  MpiPlan mpi_;  // this pod's MPI role, if any
  AgentDeps deps_;
  std::unique_ptr<SupervisorInterface> supervisor_;
  std::unique_ptr<HealthServer> health_;
  // The handover socket (agent/outer_agent) and whether this agent stepped
  // aside for a launcher its worker started.
  std::unique_ptr<HandoverServer> handover_;
  std::atomic<bool> handed_over_{false};
  absl::Mutex handover_mu_;
  bool attempt_running_ ABSL_GUARDED_BY(handover_mu_) = false;
  std::atomic<pid_t> inner_pid_{0};
  bool inner_message_kept_ = false;  // see Publish
  Observer observer_{&GlobalMetrics()};
  std::string outcome_;  // the report's outcome, for the exit event
  // Declared before rendezvous_, which shares it: destroyed after it.
  std::shared_ptr<WorkerStore> worker_store_;
  std::unique_ptr<Rendezvous> rendezvous_;
  ElasticRendezvous* elastic_ = nullptr;  // rendezvous_'s, when it has one
  std::optional<WorkerLogs> files_;
  std::vector<int> redirects_, tees_;
  const OomCounter oom_counter_ = OomCounter::ForSelf();
  CausePolicy cause_policy_;
  // The last root cause decided here, a RootCauseRecord (one-node jobs;
  // an elastic job keeps it in the store).
  std::string last_signature_;
  int restart_count_ = 0;
  // Marks the processes of this agent's attempts for the GPU-release fence.
  const std::string fence_marker_ = DeviceFenceMarker(getpid(), absl::Now());
  int attempts_ = 0;  // started on this node
  // Consecutive failed attempts without progress, on this node.
  ProgressTracker progress_{plan_.outcome.progress_file,
                            plan_.outcome.max_no_progress_restarts};
  RunReport report_;
  // The last attempt's diagnostics file, "" for none.
  std::string diagnostics_;
};

}  // namespace

int RunAgent(const RunOptions& options, const EnvMap& env) {
  return RunAgentWith(options, env, AgentDeps());
}

int RunAgentWith(const RunOptions& options, const EnvMap& env, AgentDeps deps) {
  return AgentRun(options, env, std::move(deps)).Run();
}

}  // namespace distjob
