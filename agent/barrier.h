// The start barrier of a non-elastic, operator-described job (TensorFlow,
// MXNet, ...): every pod registers in a store and waits until the whole
// cluster is present before any worker starts, so no worker dials a peer
// (a parameter server, the scheduler) whose process is not up yet.
//
// It is one round of the elastic rendezvous with min = max = the number of
// pods, over the embedded store hosted by the cluster's first pod.
#ifndef DISTJOB_AGENT_BARRIER_H_
#define DISTJOB_AGENT_BARRIER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/cli/options.h"
#include "discovery/job_env.h"
#include "rendezvous/rdzv_config.h"

namespace distjob {

struct BarrierPlan {
  bool run = false;
  std::string skip_reason;  // when !run, for the log
  std::string run_id;       // the job name
  std::string self;         // this pod, "<task>-<index>"
  std::string host_pod;     // the store's host, "<task>-<index>"
  Endpoint endpoint;        // the host pod's address, --barrier-port
  bool is_host = false;
  std::vector<std::string> pods;  // every pod of the cluster
  absl::Duration timeout = absl::Seconds(600);
  StoreSecurity security;  // the store's token and TLS, as the rendezvous'
};

// Decides whether `run` needs the barrier for `job` and how to form it.
// The host is the first pod of the first of chief, master, scheduler, ps
// that the cluster has, else of its first task: the same on every pod.
BarrierPlan PlanBarrier(const JobEnv& job, const RunOptions& options);

// The pods of `plan` not among `seen` (the addresses, i.e. pod labels, the
// store last listed), in cluster order.
std::vector<std::string> MissingPods(const BarrierPlan& plan,
                                     const std::vector<std::string>& seen);

// Why a stopped barrier ended, for its Cancelled status: who had arrived
// (`seen`, as in MissingPods) or, when none had, that the host's store was
// not reached (or, on the host, that no pod had arrived yet).
std::string StoppedBarrierMessage(const BarrierPlan& plan,
                                  const std::vector<std::string>& seen);

// Blocks until every pod of `plan` arrived. DeadlineExceeded (or
// Unavailable) naming the missing pods when they did not within the
// timeout; InvalidArgument when the store cannot be set up as asked;
// Cancelled soon after `cancelled` (polled, optional) returns true.
absl::Status RunBarrier(const BarrierPlan& plan,
                        std::function<bool()> cancelled = nullptr);

}  // namespace distjob

#endif  // DISTJOB_AGENT_BARRIER_H_
