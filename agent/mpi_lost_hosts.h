// Which workers an MPI job lost while it ran. A worker pod that dies
// mid-job breaks mpirun's remote-shell calls to it (the spawn streams of
// `distjob-agent rsh`), and mpirun then ends with a code of its own that
// says nothing of why: often 1, the code of a rank's own error. The
// launcher needs to tell the two apart, because a lost pod is retryable
// (the job can run again once the operator replaces it) and a rank's error
// is not. So each rsh the launcher's mpirun runs appends the host of a
// call that broke or found no server to a file in the launcher's private
// directory, and the launcher reads it once mpirun has ended.
#ifndef DISTJOB_AGENT_MPI_LOST_HOSTS_H_
#define DISTJOB_AGENT_MPI_LOST_HOSTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/environment.h"

namespace distjob {

// Names the record file to the rsh processes of the launcher's mpirun.
// Set by the launcher only: rsh calls made on the workers (Open MPI's tree
// spawn, Hydra's proxies) get the worker's environment and record nothing.
inline constexpr char kLostHostsFileVariable[] = "DISTJOB_MPI_LOST_HOSTS_FILE";

// One lost host and the first reason its call gave. `refused`: the
// worker answered but refused the call (the job's credentials, its bounds):
// the job's configuration, not a loss, and mpirun is not to be waited on
// (Hydra waits for ever for a proxy that never started).
struct LostHost {
  std::string host;
  std::string why;
  bool refused = false;
};

// Creates the empty record file `path` (mode 0600; it must not exist).
absl::Status CreateLostHostsFile(const std::string& path);

// Appends `host`, `why` and whether the call was `refused` to the file
// kLostHostsFileVariable names in `env`, when it names one. The file must
// already exist and be a regular file (the launcher made it): a record is one
// short line written with O_APPEND, so the rsh processes of one mpirun never
// interleave. Failing to record is silent: rsh's own exit code still tells
// mpirun.
void RecordLostHost(const EnvMap& env, absl::string_view host,
                    absl::string_view why, bool refused = false);

// The hosts recorded in `path`, each once (its first record), in the
// order first recorded; empty when the file is missing or empty.
std::vector<LostHost> ReadLostHosts(const std::string& path);

// "HOST (why)[, HOST (why)...]", at most `limit` hosts named, then
// "and N more".
std::string DescribeLostHosts(const std::vector<LostHost>& lost,
                              size_t limit = 8);

}  // namespace distjob

#endif  // DISTJOB_AGENT_MPI_LOST_HOSTS_H_
