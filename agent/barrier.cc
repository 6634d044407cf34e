#include "agent/barrier.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/stoppable_wait.h"
#include "common/logging.h"
#include "rendezvous/dynamic/c10d_rendezvous.h"

namespace distjob {
namespace {

std::string PodLabel(const std::string& task, int index) {
  return absl::StrCat(task, "-", index);
}

BarrierPlan Skip(std::string why) {
  BarrierPlan plan;
  plan.skip_reason = std::move(why);
  return plan;
}

// Runs `step` (a wait of `rendezvous`) on its own thread, so that a stop
// signal, polled through `cancelled`, ends it: the rendezvous is cancelled.
// Returns whether it was.
bool RunStoppable(Rendezvous& rendezvous, const std::function<void()>& step,
                  const std::function<bool()>& cancelled,
                  const BarrierPlan* plan = nullptr,
                  absl::Time deadline = absl::InfiniteFuture()) {
  StoppableWait wait;
  wait.what = "the start barrier";
  wait.step = step;
  wait.stop = cancelled;
  wait.deadline = deadline;
  wait.progress = [&rendezvous, plan] {
    const std::string what = rendezvous.WaitProgress();
    if (plan == nullptr || what.empty()) return what;
    const std::vector<std::string> seen = rendezvous.LastSeenAddrs();
    return absl::StrCat("the start barrier: ", what, "; missing: ",
                        seen.empty()
                            ? plan->host_pod
                            : absl::StrJoin(MissingPods(*plan, seen), ", "));
  };
  wait.cancel = [&rendezvous] {
    // Before the store goes: it refreshes who arrived (LastSeenAddrs).
    // Called for that refresh; its answer is not needed here.
    (void)rendezvous.WaitingFor();
    rendezvous.Cancel();
  };
  return distjob::RunStoppable(wait);
}

}  // namespace

BarrierPlan PlanBarrier(const JobEnv& job, const RunOptions& options) {
  const DiscoveryOptions& d = options.discovery;
  const LaunchOptions& launch = options.launch;
  if (d.no_barrier) return Skip("--no-barrier");
  if (!job.has_identity || job.cluster.tasks.empty()) {
    return Skip("no operator-described cluster");
  }
  if (job.framework == "pytorch") {
    // torch.distributed's own store (MASTER_ADDR, or the elastic
    // rendezvous) already waits for every node.
    return Skip("PyTorch's own rendezvous gathers the nodes");
  }
  if (launch.standalone) return Skip("--standalone");
  if (launch.rdzv_backend != RdzvBackend::kStatic) {
    return Skip(absl::StrCat("the job's own --rdzv-backend ",
                             RdzvBackendName(launch.rdzv_backend),
                             " gathers the nodes"));
  }
  if (job.cluster.TotalHosts() <= 1) return Skip("a one-pod job");

  const TaskPeers* host = nullptr;
  for (const char* first : {"chief", "master", "scheduler", "ps"}) {
    const TaskPeers* t = job.cluster.Find(first);
    if (t != nullptr && !t->hosts.empty()) {
      host = t;
      break;
    }
  }
  for (const TaskPeers& t : job.cluster.tasks) {
    if (host == nullptr && !t.hosts.empty()) host = &t;
  }
  BarrierPlan plan;
  plan.run = true;
  plan.run_id = job.identity.id.job;
  plan.self = PodLabel(job.identity.id.task, job.identity.id.index);
  plan.host_pod = PodLabel(host->task, 0);
  plan.is_host =
      job.identity.id.task == host->task && job.identity.id.index == 0;
  plan.endpoint.host = host->hosts[0];
  plan.endpoint.port = d.barrier_port;
  plan.timeout = d.barrier_timeout;
  plan.security = options.security;
  for (const TaskPeers& t : job.cluster.tasks) {
    for (size_t i = 0; i < t.hosts.size(); ++i) {
      plan.pods.push_back(PodLabel(t.task, static_cast<int>(i)));
    }
  }
  return plan;
}

std::vector<std::string> MissingPods(const BarrierPlan& plan,
                                     const std::vector<std::string>& seen) {
  std::vector<std::string> missing;
  for (const std::string& pod : plan.pods) {
    if (std::find(seen.begin(), seen.end(), pod) == seen.end()) {
      missing.push_back(pod);
    }
  }
  return missing;
}

std::string StoppedBarrierMessage(const BarrierPlan& plan,
                                  const std::vector<std::string>& seen) {
  std::string why;
  if (!seen.empty()) {
    why = absl::StrCat(seen.size(), "/", plan.pods.size(),
                       " pods arrived; missing: ",
                       absl::StrJoin(MissingPods(plan, seen), ", "));
  } else if (plan.is_host) {
    // The store runs in this process: an empty listing means the stop came
    // before any pod, this one included, joined.
    why = absl::StrCat("no pod had arrived yet at the store hosted here, ",
                       plan.endpoint.ToString());
  } else {
    // The host joins its own store first: nothing seen means the store,
    // so its host's pod, was never reached.
    why = absl::StrCat("the store at ", plan.endpoint.ToString(),
                       ", hosted by ", plan.host_pod, ", not reached");
  }
  return absl::StrCat("stopped while waiting for the start barrier of job '",
                      plan.run_id, "' (", why, ")");
}

namespace {

// The barrier's rendezvous: one c10d round of every pod, each one process.
RendezvousParams BarrierParams(const BarrierPlan& plan) {
  RendezvousParams params;
  params.backend = RdzvBackend::kC10d;
  params.endpoint = plan.endpoint;
  params.run_id = plan.run_id;
  params.security = plan.security;
  RdzvConfig& config = params.config;
  config.is_host = plan.is_host;
  config.join_timeout = plan.timeout;
  // Short store calls: while the host's pod is not up, each call blocks
  // (wait-for-ready) up to read_timeout, and the join deadline is checked
  // between calls.
  config.read_timeout = std::min(plan.timeout, absl::Seconds(2));
  config.exit_barrier_timeout = absl::Seconds(30);
  params.min_nodes = params.max_nodes = static_cast<int>(plan.pods.size());
  // The pod label is this node's address in the store: the listing of the
  // open round then names the pods that arrived.
  params.local_addr = plan.self;
  return params;
}

// After the round: the host keeps the store up until every pod has read
// the outcome.
absl::Status AwaitOthersPassed(const BarrierPlan& plan, Rendezvous& rendezvous,
                               const std::function<bool()>& cancelled) {
  DJ_LOG_INFO("start barrier: all {} pods of job '{}' are present",
              plan.pods.size(), plan.run_id);
  if (RunStoppable(
          rendezvous, [&] { rendezvous.Shutdown(/*succeeded=*/true); },
          cancelled) ||
      (cancelled != nullptr && cancelled())) {
    return absl::CancelledError(
        absl::StrCat("stopped while waiting for the other pods of job '",
                     plan.run_id, "' to pass the start barrier"));
  }
  return absl::OkStatus();
}

// The barrier's round failed with `why`, `seen` having arrived: the error
// names the pods missing.
absl::Status BarrierFailure(const BarrierPlan& plan, const absl::Status& why,
                            const std::vector<std::string>& seen) {
  if (absl::IsUnauthenticated(why)) {
    // The token is wrong or missing here: waiting longer cannot help.
    return absl::Status(why.code(),
                        absl::StrCat("start barrier: ", why.message()));
  }
  const absl::StatusCode code = absl::IsInvalidArgument(why)
                                    ? absl::StatusCode::kInvalidArgument
                                    : absl::StatusCode::kDeadlineExceeded;
  const std::string within = absl::StrCat(
      " within ", absl::FormatDuration(plan.timeout), " (--barrier-timeout)");
  if (seen.empty()) {
    // The host joins its own store first: an empty listing means the
    // store, and so its pod, was never reached.
    return absl::Status(
        code,
        absl::StrCat("start barrier of job '", plan.run_id, "': the store at ",
                     plan.endpoint.ToString(), " was not reached", within,
                     "; missing: ", plan.host_pod, ", which hosts it (",
                     why.message(), ")"));
  }
  return absl::Status(
      code,
      absl::StrCat("start barrier of job '", plan.run_id, "': ", seen.size(),
                   " of ", plan.pods.size(), " pods arrived", within,
                   "; missing: ", absl::StrJoin(MissingPods(plan, seen), ", "),
                   " (", why.message(), ")"));
}

}  // namespace

absl::Status RunBarrier(const BarrierPlan& plan,
                        std::function<bool()> cancelled) {
  const RendezvousParams params = BarrierParams(plan);
  DJ_LOG_INFO(
      "start barrier: waiting for the {} pods of job '{}' in the "
      "store at {} ({})",
      plan.pods.size(), plan.run_id, plan.endpoint.ToString(),
      plan.is_host ? std::string("hosted here")
                   : absl::StrCat("hosted by ", plan.host_pod));
  auto made = MakeRendezvousFor(params);
  if (!made.ok()) {
    return absl::Status(
        made.status().code(),
        absl::StrCat("start barrier: ", made.status().message()));
  }
  Rendezvous& rendezvous = **made;
  absl::StatusOr<RendezvousResult> round;
  // The rendezvous checks join_timeout between store calls, each bounded
  // by read_timeout; past both, and a second, it is cancelled whatever it
  // waits for, and that is the barrier's timeout, not a stop.
  const absl::Time hard_deadline = absl::Now() + plan.timeout +
                                   params.config.read_timeout +
                                   absl::Seconds(1);
  const bool cancel_sent = RunStoppable(
      rendezvous, [&] { round = rendezvous.Next(/*local_world_size=*/1); },
      cancelled, &plan, hard_deadline);
  const bool stopped = cancel_sent && cancelled != nullptr && cancelled();
  if (stopped && !round.ok()) {
    const std::vector<std::string> seen = rendezvous.LastSeenAddrs();
    rendezvous.Shutdown(/*succeeded=*/false);
    return absl::CancelledError(StoppedBarrierMessage(plan, seen));
  }
  if (round.ok()) return AwaitOthersPassed(plan, rendezvous, cancelled);
  const std::vector<std::string> seen = rendezvous.LastSeenAddrs();
  rendezvous.Shutdown(/*succeeded=*/false);
  return BarrierFailure(plan, round.status(), seen);
}

}  // namespace distjob
