// The agent's outer loop for `run`: rendezvous, launch the group, supervise
// it, and decide, from how it ended and the exit-code policy, whether to
// restart or to exit and with which code (the README's exit-code table).
#ifndef DISTJOB_AGENT_AGENT_LOOP_H_
#define DISTJOB_AGENT_AGENT_LOOP_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "agent/exit_codes.h"  // the codes RunAgent returns
#include "common/environment.h"
#include "rendezvous/rendezvous.h"
#include "supervisor/supervisor.h"
#include "supervisor/supervisor_options.h"

namespace distjob {

// What the loop runs on, so that tests can script it. An unset factory
// means the real thing.
struct AgentDeps {
  // Called once at start-up, before discovery (signals are read from then
  // on). Unset: Supervisor::Create.
  std::function<absl::StatusOr<std::unique_ptr<SupervisorInterface>>(
      const SupervisorOptions&)>
      make_supervisor;
  // Called once, after discovery, with the options it completed and the
  // workers' store the agent serves (nullptr: worker rank 0 hosts it).
  // Unset: the backend the flags name (standalone, static, c10d, etcd).
  std::function<absl::StatusOr<std::unique_ptr<Rendezvous>>(
      const RunOptions&, std::shared_ptr<WorkerStoreHost>)>
      make_rendezvous;
};

// Runs the job and returns the agent's exit code (agent/exit_codes.h, or
// the failed worker's own code).
int RunAgent(const RunOptions& options, const EnvMap& env);

// RunAgent over `deps`.
int RunAgentWith(const RunOptions& options, const EnvMap& env, AgentDeps deps);

}  // namespace distjob

#endif  // DISTJOB_AGENT_AGENT_LOOP_H_
