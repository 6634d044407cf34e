// What this binary is: its release (the VERSION file at the repository's
// root) and the commit it was built from, stamped at build time through
// Bazel's workspace status (tools/workspace_status.sh, .bazelrc). A build
// without a git checkout, or whose status command printed nothing, says
// "unknown" for the commit.
#ifndef DISTJOB_AGENT_BUILD_INFO_H_
#define DISTJOB_AGENT_BUILD_INFO_H_

#include <string>

namespace distjob {

// "0.2.0".
const char* BuildVersion();
// The commit's abbreviated hash, with "-dirty" when the tree differed from
// it (uncommitted changes to tracked files), or "unknown".
const char* BuildCommit();

}  // namespace distjob

#endif  // DISTJOB_AGENT_BUILD_INFO_H_
