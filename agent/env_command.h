// `distjob-agent env`: discovery (discovery/job_env.h) and each worker's
// environment from the same builder `run` uses (agent/worker_env.h),
// printed; launches nothing.
#ifndef DISTJOB_AGENT_ENV_COMMAND_H_
#define DISTJOB_AGENT_ENV_COMMAND_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/cli/options.h"
#include "common/environment.h"
#include "discovery/job_env.h"

namespace distjob {

// `env`'s own usage: its options, then run's that it reads.
std::string EnvHelp();

// `distjob-agent env [run options] [--json] [--explain] [--] [COMMAND...]`.
int EnvCommand(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_ENV_COMMAND_H_
