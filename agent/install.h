// `distjob-agent install DIR`: the init-container half of the "agent from a
// shared emptyDir" pattern. The agent-only image is FROM scratch, so it has
// no `cp`; the binary copies itself instead.
#ifndef DISTJOB_AGENT_INSTALL_H_
#define DISTJOB_AGENT_INSTALL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/environment.h"

namespace distjob {

// Copies the file at `source` (normally /proc/self/exe) to
// `dir`/distjob-agent with mode 0755 and creates `dir`/torchrun as a
// relative symlink to it. The copy goes through a temporary name and a
// rename, so a container started concurrently never sees half a binary.
absl::Status InstallAgent(const std::string& source, const std::string& dir);

// Replaces the torchrun at `torchrun` (e.g. PyTorch's
// /opt/conda/bin/torchrun) in place: the agent is copied next to it as
// distjob-agent and `torchrun` becomes a link to it; a regular file that was
// there is kept as torchrun.pytorch. InvalidArgument when the name is not
// torchrun (the agent acts as torchrun only under that name).
absl::Status ReplaceTorchrun(const std::string& source,
                             const std::string& torchrun);

// The `install` subcommand (`args` after the command): installs
// /proc/self/exe. Returns 0, 1 when the copy fails, 2 for a command line
// that does not parse.
int InstallCommand(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_INSTALL_H_
